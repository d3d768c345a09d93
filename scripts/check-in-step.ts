// Part of `npm run check`: fails when openapi.json, the client's generated
// types or the docs are out of step with the code (scripts/in-step.ts).
import { outOfStep } from './in-step.js';

const problems = await outOfStep();
for (const p of problems) console.error(`out of step: ${p}`);
process.exit(problems.length > 0 ? 1 : 0);
