// The Edit form of an editable approval: one field per top-level property of its `action.inputSchema` (a text box,
// a number box, a select for an enum, a checkbox for a boolean) and a JSON editor for what a form cannot show. It
// approves with the edited input; the gateway checks it against the tool (or an external request's JSON Schema),
// and the fields it refuses say why.

import { h } from "./dom.js";

// The schema a property stands for: a `$ref` looked up (in `$defs`, or draft-07's `definitions`), a nullable one
// (`anyOf: [X, {type: "null"}]`) as X.
function resolve(schema, root) {
  const ref = typeof schema.$ref === "string" && schema.$ref.match(/^#\/(\$defs|definitions)\/(.+)$/);
  if (ref) return resolve((root[ref[1]] || {})[ref[2]] || {}, root);
  const others = (schema.anyOf || []).filter((option) => option.type !== "null");
  return others.length === 1 && others.length < schema.anyOf.length ? resolve(others[0], root) : schema;
}

function kindOf(schema) {
  if (Array.isArray(schema.enum) && schema.enum.every((value) => typeof value === "string")) return "enum";
  return ["string", "number", "integer", "boolean"].includes(schema.type) ? schema.type : "json";
}

// One property's control. `raw()` is what it shows now: unchanged, the proposed value is kept as it was.
class Field {
  constructor(id, name, schema, value) {
    this.name = name;
    this.kind = kindOf(schema);
    this.label = name ? schema.title || name : "Input (JSON)";
    this.error = h("p", { id: `${id}-error`, class: "field-error" });
    this.control = this.build(id, schema, value);
    this.initial = this.raw();
  }

  build(id, schema, value) {
    const present = value !== undefined;
    if (this.kind === "enum") {
      const unset = schema.default === undefined || schema.default === null ? "(not set)" : `(default: ${schema.default})`;
      return h("select", { id }, h("option", { value: "" }, unset),
        schema.enum.map((option) => h("option", { value: option, selected: option === value }, option)));
    }
    if (this.kind === "boolean") return h("input", { id, type: "checkbox", checked: value === true });
    if (this.kind === "json") {
      return h("textarea", { id, rows: 3, value: present ? JSON.stringify(value, null, 2) : "" });
    }
    const numeric = this.kind !== "string";
    return h("input", { id, type: numeric ? "number" : "text", step: this.kind === "integer" ? "1" : "any",
      autocomplete: "off", value: present && value !== null ? String(value) : "" });
  }

  raw() {
    return this.kind === "boolean" ? this.control.checked : this.control.value;
  }

  get changed() {
    return this.raw() !== this.initial;
  }

  // The value to send, or `undefined` to leave the property out; throws an Error saying what is wrong.
  parsed() {
    const raw = this.raw();
    if (this.kind === "boolean" || this.kind === "string") return raw;
    if (raw.trim() === "") return undefined;
    if (this.kind === "json") {
      try {
        return JSON.parse(raw);
      } catch (error) {
        throw new Error(`not valid JSON (${error.message})`);
      }
    }
    if (this.kind === "enum") return raw;
    const number = Number(raw);
    if (!Number.isFinite(number)) throw new Error("not a number");
    if (this.kind === "integer" && !Number.isInteger(number)) throw new Error("not a whole number");
    return number;
  }

  say(problem) {
    this.error.textContent = problem || "";
    if (problem) this.control.setAttribute("aria-invalid", "true");
    else this.control.removeAttribute("aria-invalid");
  }

  view() {
    this.control.setAttribute("aria-describedby", this.error.id);
    const label = h("label", { for: this.control.id }, this.label);
    return h("div", { class: `field field-${this.kind}` }, label, this.control, this.error);
  }
}

// The fields of an input schema; a schema with no properties (or none) is edited as one JSON object.
function fieldsFor(card, action) {
  const schema = action.inputSchema || {};
  const id = (name) => `edit-${card.request.requestId}-${card.instance}-${name}`;
  const properties = Object.entries(schema.properties || {});
  if (!properties.length) return [new Field(id("input"), "", { type: "object" }, action.input)];
  // (a nullable property keeps its title and default beside the `anyOf` it resolves)
  return properties.map(([name, property], index) => new Field(id(index), name,
    { ...resolve(property, schema), title: property.title, default: property.default }, action.input[name]));
}

// The input to approve with: the proposed one, with each changed field's value (or left out, when emptied).
function editedInput(action, fields) {
  if (fields.length === 1 && fields[0].name === "") {
    const whole = fields[0].parsed();
    if (whole === null || typeof whole !== "object" || Array.isArray(whole)) throw new Error("not a JSON object");
    return whole;
  }
  const edited = { ...action.input };
  for (const field of fields.filter((f) => f.changed)) {
    const value = field.parsed();
    if (value === undefined) delete edited[field.name];
    else edited[field.name] = value;
  }
  return edited;
}

// The Edit button and its form (hidden until the button opens it), for `card`.
export function editControls(card) {
  const action = card.request.action;
  const fields = fieldsFor(card, action);
  const formId = `edit-${card.request.requestId}-${card.instance}`;
  const toggle = h("button", { type: "button", class: "default", "aria-expanded": "false", "aria-controls": formId },
    "Edit");
  const form = h("form", { id: formId, class: "edit-form", hidden: true, "aria-label": "Edit the input, then approve" },
    fields.map((field) => field.view()),
    h("div", { class: "edit-actions" }, h("button", { type: "submit", class: "primary" }, "Approve with changes")));
  toggle.addEventListener("click", () => {
    form.hidden = !form.hidden;
    toggle.setAttribute("aria-expanded", String(!form.hidden));
    if (!form.hidden) fields[0].control.focus();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    fields.forEach((field) => field.say(""));
    const wrong = [];
    for (const field of fields) {
      try {
        field.parsed();
      } catch (error) {
        field.say(error.message);
        wrong.push(field.label);
      }
    }
    if (wrong.length) {
      card.say(`Fix ${wrong.join(", ")} first.`, "error");
      return;
    }
    try {
      card.send({ optionId: "approve", input: editedInput(action, fields) });
    } catch (error) {
      fields[0].say(error.message);
    }
  });
  // The gateway refused the edit (a 422): each field it names says why; the card says the whole message.
  card.onInvalid = (details) => {
    for (const problem of (details && details.fields) || []) {
      const name = String(problem.field).split(".")[0];
      const field = fields.find((f) => f.name === name) || (fields[0].name === "" ? fields[0] : null);
      field?.say(problem.problem);
    }
  };
  return [toggle, form];
}
