// One session: the live conversation (from the event stream) and its history (from GET /api/sessions/<id>),
// titled with its first message (the API's `title`).

import { api, EVENT_TYPES, openEvents } from "./api.js";
import { channelName, h } from "./dom.js";
import { History } from "./history.js";
import { Timeline } from "./timeline.js";

const STATUS = {
  "turn.started": "running", "turn.waiting": "waiting for input", "turn.completed": "turn completed",
  "turn.failed": "turn failed", "turn.cancelled": "turn cancelled", "session.waiting": "idle",
};
const ENDED = new Set(["completed", "failed", "cancelled"]);
const RECONNECT_MS = 3000;
const QUIET_RECONNECT_MS = 3000; // the server ends each stream every 20 s: a reconnect this quick is not news
const HISTORY_DELAY_MS = 300;

export class SessionView {
  constructor(main, sessionId) {
    this.sessionId = sessionId;
    this.lastSeq = 0;
    this.timeline = new Timeline();
    this.title = h("h2", { tabIndex: -1 }, "Session");
    this.history = new History(sessionId);
    this.where = h("span", { class: "where" });
    this.status = h("span", { class: "status" }, "loading");
    this.live = h("span", { class: "live", role: "status" }, "connecting");
    this.cancel = h("button", { type: "button", class: "danger", hidden: true, onclick: () => this.cancelTurn() }, "Cancel turn");
    this.cancelNote = h("p", { class: "cancel-note", role: "status" });
    main.replaceChildren(h("section", { class: "session" },
      h("header", { class: "session-head" }, this.title,
        h("p", { class: "meta" }, this.where, h("code", {}, sessionId), " · ", this.status, " · ", this.live, " ", this.cancel),
        this.cancelNote),
      h("div", { class: "columns" },
        h("section", { class: "conversation", "aria-label": "Conversation" }, h("h3", {}, "Conversation"), this.timeline.el, this.composer()),
        h("section", { class: "history-pane", "aria-label": "History" }, h("h3", {}, "History"), this.history.el))));
    this.title.focus();
    this.start();
  }

  async start() {
    this.starting = true;
    try {
      if ((await this.refreshHistory()) && !this.closed) this.connect();
    } finally {
      this.starting = false;
    }
  }

  // Called every few seconds: a page opened while the gateway could not answer (a restart) starts once it does.
  refresh() {
    if (!this.source && !this.starting && !this.closed) this.start();
  }

  composer() {
    const input = h("input", { id: "session-message", type: "text", autocomplete: "off", required: true });
    this.sent = h("p", { class: "composer-note", role: "status" });
    const submit = async (event) => {
      event.preventDefault();
      this.said("");
      try {
        const { data } = await api("POST", `/api/sessions/${encodeURIComponent(this.sessionId)}/input`, { message: input.value });
        input.value = "";
        // A message from someone other than the turn's person waits, unseen in the stream until its turn starts;
        // a typed answer a response policy keeps pending has no event of its own until the request closes.
        if (data.effect === "queued") {
          this.said("Queued: your message starts the next turn once this one ends.", "",
            (e) => e.type === "message.received" && e.turnId === data.turnId);
        } else if ((data.results || []).some((r) => r.status === "pending")) {
          this.said("Recorded; the response policy waits for more answers.", "", (e) => e.type === "input.resolved");
        }
      } catch (error) {
        this.said(error.message, "error");
      }
    };
    return [h("form", { class: "composer", onsubmit: submit },
      h("label", { for: input.id }, "Message"), input, h("button", { type: "submit", class: "primary" }, "Send")), this.sent];
  }

  // The turn running or waiting (or queued) stops: its open requests close `cancelled`, its tools do not run.
  async cancelTurn() {
    this.cancelNote.textContent = "";
    if (!window.confirm("Cancel this turn? Its open requests close unanswered and its waiting tool calls never run.")) return;
    const had = document.activeElement === this.cancel; // disabling it drops focus to the page: give it back
    this.cancel.disabled = true;
    try {
      await api("POST", `/api/sessions/${encodeURIComponent(this.sessionId)}/cancel`);
    } catch (error) {
      this.cancelNote.textContent = error.status === 403 ? `refused: ${error.message}` : error.message;
    } finally {
      this.cancel.disabled = false;
      if (had) (this.cancel.hidden ? this.title : this.cancel).focus();
    }
  }

  // `until(event)`: the event after which the note no longer holds.
  said(text, tone = "", until = null) {
    this.sent.textContent = text;
    this.sent.className = `composer-note ${tone}`;
    this.until = until;
  }

  connect() {
    this.source = openEvents(this.sessionId, this.lastSeq);
    for (const type of EVENT_TYPES) this.source.addEventListener(type, (message) => this.receive(JSON.parse(message.data)));
    this.source.onopen = () => {
      clearTimeout(this.quiet);
      this.live.textContent = "live";
    };
    this.source.onerror = () => {
      clearTimeout(this.quiet);
      this.quiet = setTimeout(() => (this.live.textContent = "reconnecting…"), QUIET_RECONNECT_MS);
      if (this.source.readyState !== EventSource.CLOSED) return; // the browser retries by itself
      this.retry = setTimeout(() => this.connect(), RECONNECT_MS);
    };
  }

  receive(event) {
    if (event.seq <= this.lastSeq) return;
    this.lastSeq = event.seq;
    this.timeline.apply(event);
    if (this.until?.(event)) this.said("");
    if (event.type === "turn.started") this.cancelNote.textContent = "";
    if (STATUS[event.type]) this.status.textContent = STATUS[event.type];
    clearTimeout(this.historyTimer);
    this.historyTimer = setTimeout(() => this.refreshHistory(), HISTORY_DELAY_MS);
  }

  async refreshHistory() {
    try {
      const { data } = await api("GET", `/api/sessions/${encodeURIComponent(this.sessionId)}`);
      this.history.render(data);
      const ended = data.turns.every((turn) => ENDED.has(turn.status)); // the events refresh it
      if (ended && document.activeElement === this.cancel) this.title.focus(); // not lost to the page
      this.cancel.hidden = ended;
      if (data.title) this.title.textContent = data.title;
      this.where.textContent = `${data.agent} · ${channelName(data.channel)} · `;
      if (!this.lastSeq) this.status.textContent = data.status;
      return true;
    } catch (error) {
      this.status.textContent = error.message;
      return false;
    }
  }

  close() {
    this.closed = true;
    this.source?.close();
    clearTimeout(this.retry);
    clearTimeout(this.quiet);
    clearTimeout(this.historyTimer);
  }
}
