// Small DOM helpers: elements from data (text only, never HTML), names and times.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name in el) el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  el.append(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
  return el;
}

// The channel a principal answered through, in words (as engine/protocol.py's channel_word says it).
const VIA = { slack: "Slack", twilio: "SMS", github: "GitHub", "api-key": "the API" };

// A person's principal names the person and the channel ("Alice Ng via SMS"); others their platform name.
export function principalName(principal) {
  if (!principal) return "anonymous";
  const attributes = principal.attributes || {};
  if (attributes.personName) {
    const via = principal.principalId.startsWith("twilio:whatsapp:") ? "WhatsApp" : VIA[principal.authenticator];
    return via ? `${attributes.personName} via ${via}` : attributes.personName;
  }
  return attributes.userName || attributes.login || principal.principalId;
}

// Today's times as a time of day; older ones with their date. The exact ISO time is in the title.
export function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
}

export function when(iso) {
  return h("time", { dateTime: iso, title: iso }, formatTime(iso));
}

export function jsonBlock(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

const CHANNEL_NAMES = { api: "API", slack: "Slack", twilio: "Twilio", github: "GitHub" };

export function channelName(channel) {
  return CHANNEL_NAMES[channel] || channel;
}

export function shortId(id) {
  return id.length > 12 ? `${id.slice(0, 12)}…` : id;
}
