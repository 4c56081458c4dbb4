// The audit trail per turn: runs (Run 1 paused for input, Run 2 ...), requests with their candidates, tool calls.

import { outcomeText } from "./cards.js";
import { formatTime, h, principalName } from "./dom.js";

// A run ends `interrupted` only when its turn parks on people: it did not fail, it waits for them.
const RUN_STATUS = { interrupted: "paused for input" };

function runItem(run) {
  const span = run.endedAt ? `${formatTime(run.startedAt)} to ${formatTime(run.endedAt)}` : `since ${formatTime(run.startedAt)}`;
  return h("li", {}, h("strong", {}, `Run ${run.seq} ${RUN_STATUS[run.status] || run.status}`), ` · ${span}`, run.error ? ` · ${run.error.message || run.error}` : "");
}

function candidateItem(candidate) {
  const said = [candidate.decision, candidate.text ? `“${candidate.text}”` : ""].filter(Boolean).join(" ");
  return h("li", {}, `${principalName(candidate.responder)}: ${said || "answer"} → ${candidate.outcome}`,
    candidate.reason ? ` (${candidate.reason})` : "");
}

function requestItem(request) {
  const state = request.status === "pending" ? "pending" : outcomeText(request);
  return h("li", {}, h("strong", {}, request.prompt), ` · ${state}`,
    request.candidates.length ? h("ul", { class: "candidates" }, request.candidates.map(candidateItem)) : null);
}

function callItem(call) {
  const attempts = call.attempts === 1 ? "1 attempt" : `${call.attempts} attempts`;
  return h("li", {}, h("code", {}, call.toolName), ` · ${call.status} · ${attempts}`);
}

function part(title, items) {
  return items.length ? [h("h5", {}, title), h("ul", {}, items)] : null;
}

function turnView(turn, closed) {
  const details = h("details", { class: "turn", open: !closed.has(turn.id) },
    h("summary", {}, `Turn ${turn.seq} · ${turn.status} · `, h("q", {}, turn.input)),
    part("Runs", turn.runs.map(runItem)),
    part("Requests", turn.requests.map(requestItem)),
    part("Tool calls", turn.toolCalls.map(callItem)),
    turn.error ? h("p", { class: "note error" }, turn.error.message || JSON.stringify(turn.error)) : null);
  details.addEventListener("toggle", () => (details.open ? closed.delete(turn.id) : closed.add(turn.id)));
  return details;
}

export class History {
  constructor() {
    this.el = h("div", { class: "history" });
    this.closed = new Set();
  }

  render(session) {
    this.el.replaceChildren(...session.turns.map((turn) => turnView(turn, this.closed)));
    if (!session.turns.length) this.el.append(h("p", { class: "empty" }, "No turns yet."));
  }
}
