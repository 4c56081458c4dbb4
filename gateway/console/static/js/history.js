// The audit trail per turn: runs (Run 1 paused for input, Run 2 ...), requests with their candidates, tool calls;
// then the requests of agents running elsewhere (POST /api/requests), which belong to no turn.
// The API answers the latest turns; "Show earlier turns" loads the page before the oldest shown.

import { api } from "./api.js";
import { outcomeText } from "./cards.js";
import { formatTime, h, principalName } from "./dom.js";

// A run ends `interrupted` only when its turn parks on people: it did not fail, it waits for them.
const RUN_STATUS = { interrupted: "paused for input" };

function runItem(run) {
  const span = run.endedAt ? `${formatTime(run.startedAt)} to ${formatTime(run.endedAt)}` : `since ${formatTime(run.startedAt)}`;
  return h("li", {}, h("strong", {}, `Run ${run.seq} ${RUN_STATUS[run.status] || run.status}`), ` · ${span}`, run.error ? ` · ${run.error.message || run.error}` : "");
}

function candidateItem(candidate) {
  const edited = candidate.input ? `with ${JSON.stringify(candidate.input)}` : "";
  const said = [candidate.decision, candidate.text ? `“${candidate.text}”` : "", edited].filter(Boolean).join(" ");
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
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.turns = new Map(); // every turn loaded, by id: the latest page's, and the earlier pages asked for
    this.closed = new Set();
    this.oldest = Infinity; // the seq of the oldest turn loaded
    this.before = null; // the cursor of the turns before it, null when there are none
    this.list = h("div", {});
    this.earlier = h("button", { type: "button", class: "earlier", hidden: true, onclick: () => this.showEarlier() },
      "Show earlier turns");
    this.note = h("p", { class: "note error", role: "status" });
    this.el = h("div", { class: "history" }, this.earlier, this.note, this.list);
  }

  // The latest page of the history: its turns replace what was loaded of them; earlier pages stay.
  render(session) {
    this.external = session.requests; // requests of agents elsewhere: the latest page holds them
    this.add(session);
    this.draw();
  }

  add(page) {
    for (const turn of page.turns) this.turns.set(turn.id, turn);
    const oldest = page.turns.length ? page.turns[0].seq : 0;
    if (oldest <= this.oldest) {
      this.oldest = oldest;
      this.before = page.next;
    }
  }

  draw() {
    const turns = [...this.turns.values()].sort((a, b) => a.seq - b.seq);
    this.list.replaceChildren(...turns.map((turn) => turnView(turn, this.closed)));
    const external = this.external || [];
    if (external.length) this.list.append(h("section", { class: "turn" }, part("Requests of agents elsewhere", external.map(requestItem))));
    if (!turns.length && !external.length) this.list.append(h("p", { class: "empty" }, "No turns yet."));
    this.earlier.hidden = !this.before;
  }

  // The page before the oldest turn shown; focus goes to the first of its turns, at the top.
  async showEarlier() {
    this.note.textContent = "";
    this.earlier.disabled = true;
    try {
      const query = new URLSearchParams({ before: this.before });
      const { data } = await api("GET", `/api/sessions/${encodeURIComponent(this.sessionId)}?${query}`);
      this.add(data);
      this.draw();
      this.list.querySelector("summary")?.focus();
    } catch (error) {
      this.note.textContent = error.message;
    } finally {
      this.earlier.disabled = false;
    }
  }
}
