// Issue 18, item 7 (the API's side): Basin as shipped (`node dist/main.js`,
// sim driver: no database is needed) bounds its clients with the flags
// --max-connections, --headers-timeout-ms, --request-timeout-ms and
// --keep-alive-timeout-ms. Connections are raw sockets here, so that the
// test knows exactly how many are open: fetch's pool would keep its own.
// - a connection over the cap is closed unanswered, and once one of the
//   others has gone, the next is served;
// - headers sent a byte at a time, never finished, get 408 REQUEST_TIMEOUT
//   and the connection is closed, while other clients are served meanwhile;
// - a body that never ends gets the same, and an idle keep-alive connection
//   is closed by Basin.
// No timing is asserted: the trickling client would go on for a minute,
// and the test only looks at what Basin did to it.

import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { API_KEY } from '../helpers.js';
import { installation, type Launched } from './basin-process.js';

/** A raw TCP connection to the API and everything it received until it closed. */
interface Raw {
  socket: Socket;
  /** What Basin sent so far. */
  received(): string;
  /** Resolves when the connection is closed (by either side), with all Basin sent. */
  readonly closed: Promise<string>;
  /** Resolves with the first complete answer (status line to the end of its body). */
  answer(): Promise<{ status: number; body: string }>;
}

function open(port: number): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let got = '';
    const waiting: (() => void)[] = [];
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      got += chunk;
      for (const w of waiting.splice(0)) w();
    });
    socket.on('error', () => {}); // a reset is a close here
    const closed = new Promise<string>((r) =>
      socket.once('close', () => {
        for (const w of waiting.splice(0)) w();
        r(got);
      }),
    );
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => got,
        closed,
        answer: () =>
          new Promise((done, fail) => {
            const check = () => {
              const parsed = parseAnswer(got);
              if (parsed) return done(parsed);
              if (socket.destroyed) return fail(new Error(`closed after ${JSON.stringify(got)}`));
              waiting.push(check);
            };
            check();
          }),
      }),
    );
    socket.once('error', reject);
  });
}

function parseAnswer(text: string): { status: number; body: string } | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = text.slice(0, end);
  const length = Number(/^content-length:\s*(\d+)/im.exec(head)?.[1] ?? NaN);
  const body = text.slice(end + 4);
  if (!Number.isFinite(length) || body.length < length) return undefined;
  return { status: Number(head.split(' ')[1]), body: body.slice(0, length) };
}

const GET_PROJECTS = `GET /v1/projects HTTP/1.1\r\nHost: basin\r\nAuthorization: Bearer ${API_KEY}\r\n\r\n`;

/** Launches Basin (sim) with `args` and waits, without keeping a connection, until it answers. */
async function launchAnswering(
  inst: Awaited<ReturnType<typeof installation>>,
  args: string[],
): Promise<Launched> {
  const proc = inst.launch({ args });
  const deadline = Date.now() + 60_000;
  for (;;) {
    assert.ok(Date.now() < deadline, `Basin never answered:\n${proc.tail()}`);
    try {
      const c = await open(inst.apiPort);
      c.socket.end(GET_PROJECTS.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
      const a = await c.answer();
      await c.closed;
      if (a.status === 200) return proc;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test(
  '--max-connections: a connection over the cap is closed unanswered; one is served again once another left',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    const proc = await launchAnswering(inst, ['--max-connections', '3']);

    const held: Raw[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await open(inst.apiPort);
      c.socket.write(GET_PROJECTS); // keep-alive: the connection stays open after its answer
      assert.equal((await c.answer()).status, 200, `connection ${i + 1} of 3`);
      held.push(c);
    }

    const over = await open(inst.apiPort);
    over.socket.write(GET_PROJECTS);
    assert.equal(await over.closed, '', 'the fourth connection is closed without a byte of answer');
    for (const c of held) assert.equal(c.socket.destroyed, false, 'the three stay open');

    // One leaves: a new connection is served (as soon as Basin has seen the close).
    held.pop()?.socket.destroy();
    let served: number | undefined;
    for (let i = 0; i < 100 && served === undefined; i++) {
      const c = await open(inst.apiPort);
      c.socket.write(GET_PROJECTS);
      served = await c.answer().then(
        (a) => a.status,
        () => undefined,
      );
      c.socket.destroy();
      if (served === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(served, 200);
    // The held ones still work.
    held[0]!.socket.write(GET_PROJECTS);
    await new Promise<void>((r) => {
      const wait = () =>
        held[0]!.received().split('HTTP/1.1 200').length > 2 ? r() : setTimeout(wait, 20);
      wait();
    });
    for (const c of held) c.socket.destroy();
    proc.signal('SIGTERM');
    assert.deepEqual(await proc.exited, { code: 0, signal: null });
  },
);

test(
  '--headers-timeout-ms and --request-timeout-ms: a trickle of headers or a body that never ends gets 408 and is cut; others are served; idle keep-alive connections are closed',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    const proc = await launchAnswering(inst, [
      '--headers-timeout-ms',
      '1000',
      '--request-timeout-ms',
      '2000',
      '--keep-alive-timeout-ms',
      '500',
    ]);

    // Headers a byte every 100 ms, for a minute unless Basin cuts them.
    const slow = await open(inst.apiPort);
    slow.socket.write('GET /v1/projects HTTP/1.1\r\nHost: basin\r\n');
    const filler = `X-Filler: ${'a'.repeat(600)}`;
    let sent = 0;
    const trickle = setInterval(() => {
      if (slow.socket.destroyed || sent >= filler.length) return clearInterval(trickle);
      slow.socket.write(filler[sent++]!);
    }, 100);
    t.after(() => clearInterval(trickle));

    // Meanwhile another client is served, again and again.
    let servedMeanwhile = 0;
    while (!slow.socket.destroyed && servedMeanwhile < 1000) {
      const c = await open(inst.apiPort);
      c.socket.write(GET_PROJECTS.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
      if ((await c.answer()).status === 200) servedMeanwhile++;
      await c.closed;
    }
    const cut = await slow.closed;
    clearInterval(trickle);
    assert.ok(sent < filler.length, 'cut before the headers could end');
    assert.ok(servedMeanwhile > 0, 'other clients were served meanwhile');
    const answer = parseAnswer(cut);
    assert.ok(answer, `an answer before the close: ${JSON.stringify(cut)}`);
    assert.equal(answer.status, 408);
    const body = JSON.parse(answer.body);
    assert.equal(body.code, 'REQUEST_TIMEOUT');
    assert.match(body.message, /did not arrive in time/);

    // A body that never ends: cut too.
    const endless = await open(inst.apiPort);
    endless.socket.write(
      `POST /v1/projects/${'x'.repeat(10)}/vpcs HTTP/1.1\r\nHost: basin\r\nAuthorization: Bearer ${API_KEY}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name": "',
    );
    const bodyTrickle = setInterval(() => {
      if (!endless.socket.destroyed) endless.socket.write('a');
    }, 100);
    t.after(() => clearInterval(bodyTrickle));
    const endlessAnswer = parseAnswer(await endless.closed);
    clearInterval(bodyTrickle);
    assert.equal(endlessAnswer?.status, 408, 'the body never ended: 408 and closed');

    // An answered keep-alive connection left idle is closed by Basin.
    const idle = await open(inst.apiPort);
    idle.socket.write(GET_PROJECTS);
    assert.equal((await idle.answer()).status, 200);
    await idle.closed;
    assert.equal(idle.received().split('HTTP/1.1').length, 2, 'one answer, then the close');

    proc.signal('SIGTERM');
    assert.deepEqual(await proc.exited, { code: 0, signal: null });
  },
);
