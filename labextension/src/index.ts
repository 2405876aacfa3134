/**
 * aries-kernel's JupyterLab 4 / Notebook 7 extension: the agent's handle on the notebook that ran %aries.
 *
 * For each notebook whose kernel is aries-kernel it opens a comm (see protocol.ts) through which the kernel
 * inserts cells below a cell, reads the live notebook (sent before each execution, unsaved edits included),
 * runs a cell the agent inserted and removes the agent's cells of rewound turns (unless edited since). It marks the agent's cells (cell metadata "aries") with a CSS class, and
 * renders the steps output of a run's record as an "Insert steps as cells" button, which works without the
 * kernel (after a reload too: the output holds the steps).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';
import { CodeCell, Cell } from '@jupyterlab/cells';

import {
  AGENT_CELL_CLASS,
  COMM_TARGET,
  INewCell,
  IStepsData,
  PROTOCOL,
  STEPS_MIME,
  parseKernelMessage,
  parseSteps
} from './protocol';

const KERNEL_IMPLEMENTATION = 'aries-kernel';
const OUTPUT_CHARS = 4000; // text of one output sent in a snapshot
const SOURCE_CHARS = 100_000; // source of one cell sent in a snapshot

type Json = { [key: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The result of an insert: the new cells' ids, or why nothing was inserted. */
type InsertResult = { ok: true; ids: string[] } | { ok: false; error: string };

/** Why cells cannot be inserted into ``panel`` now, or null when they can. */
function notWritable(panel: NotebookPanel): string | null {
  const model = panel.content.model;
  if (panel.isDisposed || model === null) {
    return 'the notebook is closed';
  }
  if (model.readOnly || panel.context.contentsModel?.writable === false) {
    return `${panel.context.path} is open read-only: no cell was inserted`;
  }
  return null;
}

/** Insert ``cells`` below the cell ``after`` (at the end when null), in one undoable transaction. */
export function insertCells(panel: NotebookPanel, after: string | null, cells: INewCell[]): InsertResult {
  const problem = notWritable(panel);
  if (problem !== null) {
    return { ok: false, error: problem };
  }
  const shared = panel.content.model!.sharedModel;
  let index = shared.cells.length;
  if (after !== null) {
    const at = shared.cells.findIndex(cell => cell.id === after);
    if (at < 0) {
      return {
        ok: false,
        error: `cell ${after} is not in ${panel.context.path} (deleted, or the notebook was reloaded): no cell was inserted`
      };
    }
    index = at + 1;
  }
  let ids: string[] = [];
  shared.transact(() => {
    const made = shared.insertCells(
      index,
      cells.map(cell => ({ cell_type: cell.cell_type, source: cell.source, metadata: cell.metadata as Json }))
    );
    ids = made.map(cell => cell.id);
  });
  markAgentCells(panel.content);
  return { ok: true, ids };
}

/** Remove the agent's cells named in ``cells`` whose source is unchanged, in one undoable transaction; a cell
 * the user wrote, edited or already deleted is kept (listed in ``kept``). */
export function removeCells(panel: NotebookPanel, cells: { id: string; source: string }[]): Json {
  const problem = notWritable(panel);
  if (problem !== null) {
    return { ok: false, error: problem };
  }
  const shared = panel.content.model!.sharedModel;
  const wanted = new Map(cells.map(cell => [cell.id, cell.source]));
  const indexes: number[] = [];
  shared.cells.forEach((cell, index) => {
    const tagged = (cell.toJSON().metadata as Json | undefined)?.aries !== undefined;
    if (tagged && wanted.get(cell.id) === cell.getSource()) {
      indexes.push(index);
    }
  });
  const removed = indexes.map(index => shared.cells[index].id);
  shared.transact(() => {
    for (const index of [...indexes].reverse()) {
      shared.deleteCell(index);
    }
  });
  return { ok: true, removed, kept: cells.map(cell => cell.id).filter(id => !removed.includes(id)) };
}

/** Give every cell written by the agent (metadata "aries") the agent's CSS class. */
function markAgentCells(notebook: Notebook): void {
  for (const cell of notebook.widgets) {
    cell.toggleClass(AGENT_CELL_CLASS, cell.model.getMetadata('aries') !== undefined);
  }
}

/** The text of one nbformat output, cut to OUTPUT_CHARS. */
function outputText(output: Json): string {
  let text = '';
  if (output.output_type === 'stream') {
    text = Array.isArray(output.text) ? output.text.join('') : String(output.text ?? '');
  } else if (output.output_type === 'error') {
    text = `${String(output.ename)}: ${String(output.evalue)}`;
  } else {
    const data = (output.data ?? {}) as Json;
    const plain = data['text/plain'];
    text = Array.isArray(plain) ? plain.join('') : typeof plain === 'string' ? plain : '';
  }
  return text.length > OUTPUT_CHARS ? text.slice(0, OUTPUT_CHARS) + `… (${text.length} chars)` : text;
}

/** The live notebook as the kernel reads it: cells with ids, sources and text outputs, unsaved edits included. */
function snapshot(panel: NotebookPanel): Json {
  const model = panel.content.model;
  const cells = [];
  if (model !== null) {
    for (const cell of model.sharedModel.cells) {
      const json = cell.toJSON() as Json;
      const source = cell.getSource();
      cells.push({
        id: cell.id,
        cell_type: cell.cell_type,
        source: source.length > SOURCE_CHARS ? source.slice(0, SOURCE_CHARS) : source,
        source_chars: source.length,
        execution_count: json.execution_count ?? null,
        outputs: Array.isArray(json.outputs) ? (json.outputs as Json[]).map(outputText) : [],
        aries: (json.metadata as Json | undefined)?.aries ?? null
      });
    }
  }
  return {
    path: panel.context.path,
    dirty: model?.dirty ?? false,
    read_only: notWritable(panel) !== null,
    cells
  };
}

/** The comm of one notebook panel with its aries-kernel. */
class Bridge {
  constructor(panel: NotebookPanel) {
    this.panel = panel;
    panel.sessionContext.kernelChanged.connect(() => this.connect());
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.comm = null; // the kernel forgets its comms on restart: open a new one when it is back
      } else if (status === 'idle' && this.comm === null) {
        this.connect();
      }
    });
    panel.context.pathChanged.connect(() => this.send({ type: 'snapshot', reason: 'renamed', cell_id: null }));
    panel.disposed.connect(() => this.close());
    void panel.sessionContext.ready.then(() => this.connect());
  }

  /** Open the comm when the panel's kernel is aries-kernel (other kernels have no such target); one attempt at
   * a time, since the kernel and the session become ready in either order. */
  connect(): Promise<void> {
    if (this.connecting === null) {
      this.connecting = this.open().finally(() => {
        this.connecting = null;
      });
    }
    return this.connecting;
  }

  private async open(): Promise<void> {
    await this.panel.context.ready; // the hello carries the notebook's cells
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel === null || this.panel.isDisposed || (this.kernel === kernel && this.comm !== null)) {
      return;
    }
    const info = await kernel.info;
    if (info.implementation !== KERNEL_IMPLEMENTATION || this.panel.isDisposed) {
      return;
    }
    this.close(); // a comm with the panel's previous kernel
    this.kernel = kernel;
    const comm = kernel.createComm(COMM_TARGET);
    comm.onMsg = msg => this.handle(msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
      }
    };
    this.comm = comm;
    comm.open({ protocol: PROTOCOL, type: 'hello', frontend: 'jupyterlab', notebook: snapshot(this.panel) });
  }

  /** Send the live notebook before a cell of this panel executes. */
  scheduled(cell: Cell): void {
    this.send({ type: 'snapshot', reason: 'execute', cell_id: cell.model.id });
  }

  private send(message: Json): void {
    if (this.comm === null || this.comm.isDisposed) {
      return;
    }
    const data: Json = { protocol: PROTOCOL, ...message };
    if (message.type === 'snapshot') {
      data.notebook = snapshot(this.panel);
    }
    this.comm.send(data);
  }

  private reply(request: string | null, result: Json): void {
    this.send({ type: 'reply', request, ...result });
  }

  private handle(msg: KernelMessage.ICommMsgMsg): void {
    const parsed = parseKernelMessage(msg.content.data);
    if ('error' in parsed) {
      this.reply(parsed.request, { ok: false, error: parsed.error });
      return;
    }
    try {
      if (parsed.type === 'insert') {
        this.reply(parsed.request, insertCells(this.panel, parsed.after, parsed.cells));
      } else if (parsed.type === 'remove') {
        this.reply(parsed.request, removeCells(this.panel, parsed.cells));
      } else {
        this.reply(parsed.request, this.run(parsed.cell_id));
      }
    } catch (error) {
      this.reply(parsed.request, { ok: false, error: `the frontend failed: ${String(error)}` });
    }
  }

  /** Queue the agent's cell ``id`` for execution (it runs once the kernel is free). */
  private run(id: string): Json {
    const cell = this.panel.content.widgets.find(widget => widget.model.id === id);
    if (cell === undefined) {
      return { ok: false, error: `cell ${id} is not in ${this.panel.context.path}` };
    }
    if (!(cell instanceof CodeCell) || cell.model.getMetadata('aries') === undefined) {
      return { ok: false, error: `cell ${id} is not a code cell the agent wrote: only those are run on its behalf` };
    }
    void CodeCell.execute(cell, this.panel.sessionContext);
    return { ok: true, queued: true };
  }

  close(): void {
    if (this.comm !== null && !this.comm.isDisposed) {
      this.comm.close();
    }
    this.comm = null;
  }

  readonly panel: NotebookPanel;
  private kernel: Kernel.IKernelConnection | null = null;
  private connecting: Promise<void> | null = null;
  private comm: Kernel.IComm | null = null;
}

/** The panel and cell that show ``node`` (an output), if a notebook shows it. */
function cellOf(tracker: INotebookTracker, node: HTMLElement): { panel: NotebookPanel; cell: Cell } | null {
  let found: { panel: NotebookPanel; cell: Cell } | null = null;
  tracker.forEach(panel => {
    const cell = panel.content.widgets.find(widget => widget.node.contains(node));
    if (cell !== undefined && found === null) {
      found = { panel, cell };
    }
  });
  return found;
}

/** The new cells for a run's steps: one code cell per step, then the answer as markdown if asked. */
export function stepCells(data: IStepsData, withAnswer: boolean): INewCell[] {
  const cells: INewCell[] = data.steps.map(step => ({
    cell_type: 'code',
    source: step.code,
    metadata: { aries: { session: data.session, turn: step.turn, step: step.step } }
  }));
  if (withAnswer && data.answer) {
    const turn = data.steps.length ? data.steps[data.steps.length - 1].turn : 0;
    cells.push({ cell_type: 'markdown', source: data.answer, metadata: { aries: { session: data.session, turn, answer: true } } });
  }
  return cells;
}

/** The steps output of a run's record: what the run did, and a button that inserts it as cells. */
class StepsRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private tracker: INotebookTracker) {
    super();
    this.addClass('aries-steps');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = parseSteps(model.data[STEPS_MIME]);
    this.node.textContent = '';
    if (data === null) {
      this.node.textContent = 'This steps output is not of a shape this version of aries-kernel reads.';
      return;
    }
    const button = document.createElement('button');
    button.className = 'jp-mod-styled jp-mod-accept aries-insert-steps';
    button.textContent = `Insert steps as cells (${data.steps.length})`;
    const note = document.createElement('span');
    note.className = 'aries-steps-note';
    const withAnswer = document.createElement('input');
    withAnswer.type = 'checkbox';
    const label = document.createElement('label');
    label.className = 'aries-steps-answer';
    label.append(withAnswer, ' and the answer as a markdown cell');
    button.onclick = () => {
      const where = cellOf(this.tracker, this.node);
      if (where === null) {
        note.textContent = ' Open this notebook in JupyterLab to insert the steps.';
        return;
      }
      const result = insertCells(where.panel, where.cell.model.id, stepCells(data, withAnswer.checked));
      note.textContent = result.ok ? ` Inserted ${result.ids.length} cell(s) below.` : ` ${result.error}`;
    };
    this.node.append(button, ...(data.answer ? [label] : []), note);
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'aries-kernel:notebook-bridge',
  description: 'The aries-kernel agent inserts, reads and runs cells of the notebook that ran %aries.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, rendermime: IRenderMimeRegistry) => {
    const bridges = new WeakMap<Notebook, Bridge>();
    tracker.widgetAdded.connect((_, panel) => {
      bridges.set(panel.content, new Bridge(panel));
      void panel.context.ready.then(() => {
        markAgentCells(panel.content);
        panel.content.model?.cells.changed.connect(() =>
          void Promise.resolve().then(() => markAgentCells(panel.content))
        );
      });
    });
    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => bridges.get(notebook)?.scheduled(cell));
    rendermime.addFactory(
      { safe: true, mimeTypes: [STEPS_MIME], defaultRank: 40, createRenderer: () => new StepsRenderer(tracker) },
      40
    );
  }
};

export default plugin;
