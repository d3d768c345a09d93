import type { Project } from '../domain/types.js';
import type { Ctx, Principal } from './context.js';

export function listProjects(ctx: Ctx, p: Principal): Promise<Project[]> {
  return ctx.store.projects.list([...p.projectIds]);
}
