// Small pieces every page uses: errors as Basin states them, copy buttons,
// statuses, sizes.
import { useState } from 'react';
import type { Service } from '../../src/client/index.js';
import { describeError } from './session.js';

/** An error with the API's code and message, announced to screen readers. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const { code, message } = describeError(error);
  return (
    <p className="error" role="alert">
      <strong>{code}</strong>: {message}
    </p>
  );
}

/** A value shown as text, with a button copying it (clipboard, or a selection where there is none). */
export function CopyField({ label, value, id }: { label: string; value: string; id: string }) {
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('Copied.');
    } catch {
      // Plain HTTP on another host: no clipboard API. Select it for Ctrl+C.
      const field = document.getElementById(id) as HTMLInputElement | null;
      field?.select();
      setCopied('Selected: press Ctrl+C to copy.');
    }
  };
  return (
    <div className="copy-field">
      <label htmlFor={id}>{label}</label>
      <div className="copy-row">
        <input
          id={id}
          readOnly
          value={value}
          spellCheck={false}
          onFocus={(e) => e.target.select()}
        />
        <button type="button" onClick={copy} aria-label={`Copy ${label}`}>
          Copy
        </button>
      </div>
      <span role="status" className="hint">
        {copied}
      </span>
    </div>
  );
}

export function StatusBadge({ status }: { status: string | undefined }) {
  const s = status ?? 'UNKNOWN';
  return <span className={`badge badge-${s.toLowerCase()}`}>{s}</span>;
}

export function sizeOf(svc: Service): string {
  const spec = svc.resources?.[0]?.spec;
  if (!spec || spec.cpu_millis === undefined) return 'shared';
  return `${spec.cpu_millis}m / ${spec.memory_gbs} GB`;
}

export function endpointOf(svc: Service): string {
  return svc.endpoint ? `${svc.endpoint.host}:${svc.endpoint.port}` : '—';
}

/** Indeterminate progress with what it waits for. */
export function Progress({ text }: { text: string }) {
  return (
    <div className="progress" role="status">
      <progress aria-label={text} />
      <span>{text}</span>
    </div>
  );
}
