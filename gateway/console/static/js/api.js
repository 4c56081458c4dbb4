// The public REST API and the event stream; the API key (if the user gave one) comes from localStorage.

const KEY = "hitl.apiKey";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const apiKey = {
  get: () => localStorage.getItem(KEY) || "",
  set: (value) => (value ? localStorage.setItem(KEY, value) : localStorage.removeItem(KEY)),
};

// Every event type of the protocol: an EventSource only delivers the named events it listens for.
export const EVENT_TYPES = [
  "message.received", "turn.started", "assistant.message", "action.called", "action.result",
  "input.requested", "turn.waiting", "approval.candidate", "approval.settled", "input.resolved",
  "input.reminded", "input.escalated", "turn.completed", "turn.failed", "turn.cancelled", "session.waiting",
];

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = apiKey.get();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error || {};
    if (response.status === 401) {
      const message = key ? "The gateway refused this API key: paste a valid one under “API key”."
        : "This gateway needs an API key: paste one under “API key”.";
      window.dispatchEvent(new CustomEvent("hitl:unauthorized", { detail: message }));
      throw new ApiError(401, error.code || "unauthorized", message, error.details);
    }
    // Not the API's own JSON error (a proxy's HTML page, where HTTP/2 has no status text): name the status at least.
    const why = response.statusText ? ` (${response.statusText})` : "";
    const message = error.message || `The gateway answered ${response.status}${why} without saying why; try again.`;
    throw new ApiError(response.status, error.code || "http_error", message, error.details);
  }
  return { status: response.status, data };
}

// A live stream; an EventSource cannot send headers, so the key travels as access_token.
function openStream(path, params = {}) {
  const query = new URLSearchParams(params);
  const key = apiKey.get();
  if (key) query.set("access_token", key);
  return new EventSource(`${path}?${query}`);
}

// One session's events after `after`.
export function openEvents(sessionId, after) {
  return openStream(`/api/sessions/${encodeURIComponent(sessionId)}/events`, { after: String(after) });
}

// The inbox: an `inbox` event ({requestIds, next}) at once and whenever a request opens or closes.
export function openInbox() {
  return openStream("/api/inbox/events");
}
