// The API's JSON shapes, for the JSDoc types of the page's modules: taken from the
// server's own declarations, so the page and the server cannot drift apart unnoticed
// (`tsc -p src/ui/public` checks the page; test/ui/assets.test.ts runs it).
import type { RestoreReport, RewindReport } from '../../backup/index.js';
import type { TurnSummary } from '../views.js';

export type { AfterState, RestoreReport, RewindReport } from '../../backup/index.js';
export type { DiffLine, DiffView, FileStatus, FileView, TurnSummary, TurnView } from '../views.js';

export interface SessionSummary {
  id: string;
  turns: TurnSummary[];
}

export interface SessionsAnswer {
  home: string;
  sessions: SessionSummary[];
}

export interface RestoreAnswer {
  /** Named paths were not in the turn: nothing was changed. */
  refused: boolean;
  report: RestoreReport;
}

/** What the last action on a turn came to, as the report panel shows it. */
export type Outcome =
  | { type: 'error'; message: string }
  | { type: 'restore'; paths: string[] | undefined; result: RestoreAnswer }
  | { type: 'rewind'; result: RewindReport };

export interface RewindPlanAnswer {
  /** Newest first. */
  turns: TurnSummary[];
  /** The rewind's dry run: what it would restore, and where it would stop. */
  preview: RewindReport;
}

export type Conflict = RestoreReport['conflicts'][number];
