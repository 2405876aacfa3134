/**
 * The aries-kernel notebook bridge protocol, version 1: the shapes of the messages on the comm target
 * "aries.notebook" and their validation (the kernel side is aries_kernel/notebook/frontend.py).
 *
 * The frontend opens one comm per notebook whose kernel is aries-kernel ("hello"), and sends a "snapshot" of
 * the live notebook just before each execution it schedules: while a %aries cell runs the kernel's shell
 * channel is busy, so what the frontend sends then waits until the cell ends, while what the kernel sends
 * (IOPub) arrives at once. The kernel asks ("insert", "run", "remove"); the frontend answers each with a "reply" naming the
 * request. A message of a wrong shape is answered with a reply whose error says what is wrong; it never throws.
 */

export const PROTOCOL = 1;
export const COMM_TARGET = 'aries.notebook';
export const STEPS_MIME = 'application/vnd.aries.steps+json';
export const AGENT_CELL_CLASS = 'aries-agent-cell';

/** The most cells one insert may carry, and the longest source of one cell (characters). */
export const MAX_CELLS = 1000;
export const MAX_SOURCE = 1_000_000;

export type CellType = 'code' | 'markdown';

export interface INewCell {
  cell_type: CellType;
  source: string;
  metadata: Record<string, unknown>;
}

export interface IInsertRequest {
  protocol: number;
  type: 'insert';
  request: string;
  after: string | null;
  cells: INewCell[];
}

export interface IRunRequest {
  protocol: number;
  type: 'run';
  request: string;
  cell_id: string;
}

/** Remove the agent's cells ``id`` if their source is still ``source`` (a cell edited since is kept). */
export interface IRemoveRequest {
  protocol: number;
  type: 'remove';
  request: string;
  cells: { id: string; source: string }[];
}

export type KernelRequest = IInsertRequest | IRunRequest | IRemoveRequest;

/** What the steps output (the run's record) holds: the run's Repl steps and, optionally, its answer. */
export interface IStepsData {
  protocol: number;
  session: string;
  steps: { turn: number; step: number; code: string }[];
  answer: string | null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The error that a new cell's shape has, or null when it is good. */
function cellError(cell: unknown, index: number): string | null {
  if (!isObject(cell)) {
    return `cells[${index}] is not an object`;
  }
  if (cell.cell_type !== 'code' && cell.cell_type !== 'markdown') {
    return `cells[${index}].cell_type must be "code" or "markdown", not ${JSON.stringify(cell.cell_type)}`;
  }
  if (typeof cell.source !== 'string') {
    return `cells[${index}].source must be a string`;
  }
  if (cell.source.length > MAX_SOURCE) {
    return `cells[${index}].source has ${cell.source.length} characters, over ${MAX_SOURCE}`;
  }
  if (!isObject(cell.metadata)) {
    return `cells[${index}].metadata must be an object`;
  }
  return null;
}

/** The request a kernel message holds, or the error that its shape has (for the error reply). */
export function parseKernelMessage(data: unknown): KernelRequest | { error: string; request: string | null } {
  if (!isObject(data)) {
    return { error: 'the message is not a JSON object', request: null };
  }
  const request = typeof data.request === 'string' ? data.request : null;
  if (data.protocol !== PROTOCOL) {
    return {
      error: `protocol ${JSON.stringify(data.protocol)} is not supported (this extension speaks ${PROTOCOL}); update aries-kernel so that the kernel and its extension match`,
      request
    };
  }
  if (request === null || request.length === 0 || request.length > 200) {
    return { error: 'request must be a non-empty string of at most 200 characters', request: null };
  }
  if (data.type === 'insert') {
    if (data.after !== null && typeof data.after !== 'string') {
      return { error: 'after must be a cell id (a string) or null', request };
    }
    if (!Array.isArray(data.cells) || data.cells.length === 0) {
      return { error: 'cells must be a non-empty list', request };
    }
    if (data.cells.length > MAX_CELLS) {
      return { error: `cells has ${data.cells.length} entries, over ${MAX_CELLS}`, request };
    }
    for (let index = 0; index < data.cells.length; index++) {
      const error = cellError(data.cells[index], index);
      if (error !== null) {
        return { error, request };
      }
    }
    return data as unknown as IInsertRequest;
  }
  if (data.type === 'run') {
    if (typeof data.cell_id !== 'string' || data.cell_id.length === 0) {
      return { error: 'cell_id must be a non-empty string', request };
    }
    return data as unknown as IRunRequest;
  }
  if (data.type === 'remove') {
    if (!Array.isArray(data.cells) || data.cells.length === 0 || data.cells.length > MAX_CELLS) {
      return { error: `cells must be a list of 1 to ${MAX_CELLS} cells`, request };
    }
    for (let index = 0; index < data.cells.length; index++) {
      const cell = data.cells[index];
      if (!isObject(cell) || typeof cell.id !== 'string' || typeof cell.source !== 'string') {
        return { error: `cells[${index}] needs id and source (strings)`, request };
      }
    }
    return data as unknown as IRemoveRequest;
  }
  return {
    error: `unknown message type ${JSON.stringify(data.type)} (expected "insert", "run" or "remove")`,
    request
  };
}

/** The steps output's data, or null when it is not of the shape the kernel writes. */
export function parseSteps(data: unknown): IStepsData | null {
  if (!isObject(data) || data.protocol !== PROTOCOL || typeof data.session !== 'string') {
    return null;
  }
  if (!Array.isArray(data.steps) || data.steps.length > MAX_CELLS) {
    return null;
  }
  for (const step of data.steps) {
    if (
      !isObject(step) ||
      typeof step.code !== 'string' ||
      typeof step.turn !== 'number' ||
      typeof step.step !== 'number'
    ) {
      return null;
    }
  }
  if (data.answer !== null && data.answer !== undefined && typeof data.answer !== 'string') {
    return null;
  }
  return {
    protocol: PROTOCOL,
    session: data.session,
    steps: data.steps as IStepsData['steps'],
    answer: (data.answer as string | null | undefined) ?? null
  };
}
