// A chorus prompter written in JavaScript: every seat on the panel gets the
// question from a different angle — a different persona in its system
// prompt — so the answers disagree where it matters instead of repeating
// each other. Honest about the budget: when the run has fewer calls left
// than seats, it asks fewer and says so. The run's attachments (images,
// PDFs, files) go in every persona's message, before the question
// (`content-part.attachment`): the host sends each one as the model takes
// it, and to a model that cannot see it, what the pipeline's
// `attachments_for_text_models` says (a description, by default).
//
// Build (componentize-js 0.23.0 from npm):
//
//   npm install
//   npm run build        # -> personas.wasm
//
// then in plugins.toml:
//
//   [plugins.personas]
//   path = "personas.wasm"
//   max_memory_mib = 64
//   settings = { personas = ["a physicist", "a historian"] }   # optional
//
// Contract: chorus:strategy@0.4.0 (wit/0.4.0), world `prompter-plugin`.

import { budget, log } from 'chorus:strategy/host@0.4.0';

const DEFAULT_PERSONAS = [
  'a careful expert who states assumptions and gives the standard, well-established answer',
  'a skeptic who looks for what is wrong, missing or uncertain in the obvious answer',
  'a practitioner who cares about what works in practice: concrete steps, examples and pitfalls',
  'a teacher who explains the reasoning simply, from first principles',
  'a contrarian who argues for the strongest alternative to the usual answer',
];

const KNOWN = new Set(['personas', 'system']);

// The settings as an object, or a thrown string saying what is wrong
// (a thrown string is how a JavaScript plugin returns `err`).
function parseSettings(text) {
  let settings;
  try {
    settings = JSON.parse(text || '{}');
  } catch (e) {
    throw `settings are not JSON: ${e}`;
  }
  if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
    throw 'settings must be a table';
  }
  const unknown = Object.keys(settings).filter((k) => !KNOWN.has(k));
  if (unknown.length > 0) {
    throw `unknown setting(s) ${unknown.join(', ')}: expected personas (a list of strings) and system (a string)`;
  }
  const personas = settings.personas ?? DEFAULT_PERSONAS;
  if (!Array.isArray(personas) || personas.length === 0 ||
      !personas.every((p) => typeof p === 'string' && p.trim() !== '')) {
    throw 'personas must be a non-empty list of non-empty strings';
  }
  if (settings.system !== undefined && typeof settings.system !== 'string') {
    throw 'system must be a string';
  }
  return { personas, system: settings.system ?? '' };
}

const text = (role, content) => ({ role, content: [{ tag: 'text', val: content }] });

// The question, after the run's attachments, placed by id (the host inlines them).
const question = (request) => ({
  role: 'user',
  content: [
    ...request.attachments.map((a) => ({ tag: 'attachment', val: a.id })),
    { tag: 'text', val: request.prompt },
  ],
});

export const prompter = {
  validateSettings(settings) {
    parseSettings(settings);
  },

  prompt(request, plan, settings) {
    const { personas, system } = parseSettings(settings);
    const notes = [];
    let seats = plan.panel;
    const left = budget().callsLeft;
    if (seats.length > left) {
      notes.push(`Only ${left} model calls were left in the run's budget, so ${left} of ${seats.length} seats were asked.`);
      seats = seats.slice(0, left);
    }
    const requests = seats.map((seat, i) => {
      const persona = personas[i % personas.length];
      const prefix = system.trim() === '' ? '' : `${system.trim()}\n\n`;
      return {
        label: `persona ${i + 1}: ${persona.split(/[,:]/)[0]}`,
        model: seat.model,
        messages: [
          text('system', `${prefix}Answer as ${persona}.`),
          question(request),
        ],
        sampling: seat.sampling,
      };
    });
    log('debug', `asking ${requests.length} personas`);
    notes.push(`Each of the ${requests.length} models answered as a different persona.`);
    if (request.attachments.length > 0) {
      const names = request.attachments.map((a) => `#${a.id} ${a.name ?? a.mime}`);
      notes.push(`The attachments (${names.join(', ')}) were placed before each persona's question.`);
    }
    return { requests, notes };
  },
};
