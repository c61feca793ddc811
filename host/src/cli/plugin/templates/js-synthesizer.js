// {{name}}: a chorus synthesizer. It merges the answers with the plan's
// synthesizers (tried in order), and is honest about what it returns:
// `synthesis` of two or more answers, the lone survivor verbatim as
// `single`, `none` when nobody answered, `unmerged` (the answers side by
// side) when every synthesizer failed. Its sources are the call ids of the
// answers it merged. With web search on, each answer goes to the merge with
// the web sources it cites, numbered as the list chorus ends the answer
// with, and the merger is asked to cite them by those numbers.
//
//   [plugins.{{name}}.settings]
//   instructions = "Merge these answers into the best one."   # optional
//
// Return an error by throwing a string (a thrown Error object would trap).

import { completeAnswer, progress } from 'chorus:strategy/host@0.6.0';

const DEFAULT_INSTRUCTIONS = 'You are given a question and several answers to it. Write the single best answer: '
  + 'keep what they agree on, resolve their disagreements, drop what is wrong. Do not mention the other answers.';
const CITE = 'The answers cite web sources, numbered under each answer. Cite the sources you rely on with their '
  + 'numbers in brackets, like [1], exactly as numbered there; cite no others and do not list them at the end.';

// The settings, or a thrown string saying what is wrong (shown by `chorus check`).
function parse(text) {
  let settings;
  try {
    settings = JSON.parse(text || '{}');
  } catch (e) {
    throw `settings are not JSON: ${e}`;
  }
  const unknown = Object.keys(settings).filter((k) => k !== 'instructions');
  if (unknown.length > 0) throw `unknown setting(s) ${unknown.join(', ')}: expected optional \`instructions\``;
  const instructions = settings.instructions ?? DEFAULT_INSTRUCTIONS;
  if (typeof instructions !== 'string' || instructions.trim() === '') throw 'instructions must be a non-empty string';
  return { instructions };
}

const message = (role, text) => ({ role, content: [{ tag: 'text', val: text }] });
const answer = (kind, text, sources, notes) => ({ kind, text, sources, notes, details: '', toolCalls: [] });

// A URL as chorus compares sources: scheme and host in lower case, no
// fragment, no `utm_*` parameters, no trailing `/`.
function urlKey(url) {
  const [base, query = ''] = url.split('#')[0].split(/\?(.*)/s);
  const parts = base.split('/');
  const key = parts.slice(0, 3).join('/').toLowerCase() + ('/' + parts.slice(3).join('/')).replace(/\/+$/, '');
  const kept = query.split('&').filter((p) => p !== '' && !p.startsWith('utm_'));
  return kept.length > 0 ? `${key}?${kept.join('&')}` : key;
}

// The web sources the answers cite (`reply.citations`), numbered as chorus
// numbers the list it ends the answer with: in call order, each URL once.
function webSources(completions) {
  const keys = [];
  const byId = [...completions].sort((a, b) => (a.id ?? Infinity) - (b.id ?? Infinity));
  for (const c of byId) {
    for (const citation of c.outcome.tag === 'ok' ? c.outcome.val.citations : []) {
      if (!keys.includes(urlKey(citation.url))) keys.push(urlKey(citation.url));
    }
  }
  return keys;
}

// What goes under an answer in the merge prompt: the sources it cites, by number.
function cited(reply, sources) {
  const lines = new Map();
  for (const citation of reply.citations) {
    const n = sources.indexOf(urlKey(citation.url)) + 1;
    const title = citation.title ? `${citation.title} ` : '';
    if (!lines.has(n)) lines.set(n, `[${n}] ${title}<${citation.url}>`);
  }
  return lines.size > 0 ? `\n\nSources this answer cites:\n${[...lines.values()].join('\n')}` : '';
}

export const synthesizer = {
  validateSettings(settings) {
    parse(settings);
  },

  // When the run's caller offered tools and the panel proposed calls:
  // leave the choice of call to chorus (the majority's call, else the
  // pipeline's synthesizer model chooses). Return { tag: 'merge' } to
  // merge the answers into text instead, or { tag: 'answer', val: … } with
  // `toolCalls` to make a call yourself.
  chooseToolCalls(request, plan, completions, settings) {
    return { tag: 'by-host' };
  },

  synthesize(request, plan, completions, settings) {
    const { instructions } = parse(settings);
    const notes = [];
    const answered = [];
    for (const c of completions) {
      if (c.outcome.tag === 'ok' && c.outcome.val.content.trim() !== '' && c.id !== undefined) {
        answered.push({ id: c.id, model: c.model, reply: c.outcome.val });
      } else if (c.outcome.tag === 'ok') {
        notes.push(`${c.model} gave an empty answer.`);
      } else {
        notes.push(`${c.model} failed: ${c.outcome.val.message}`);
      }
    }
    if (answered.length === 0) return answer('none', `No model answered (${completions.length} tried).`, [], notes);
    if (answered.length === 1) {
      const [only] = answered;
      return answer('single', only.reply.content, [only.id], [`Only ${only.model} answered, so this is its answer verbatim.`, ...notes]);
    }
    const sources = answered.map((a) => a.id);
    const web = webSources(completions);
    const prompt = `Question:\n${request.prompt}\n\n`
      + answered.map((a, n) => `--- Answer ${n + 1} ---\n${a.reply.content.trim()}${cited(a.reply, web)}\n\n`).join('');
    const merging = web.length > 0 ? `${instructions}\n\n${CITE}` : instructions;
    for (const model of plan.synthesizers) {
      progress(`merging ${answered.length} answers with ${model}`);
      // The merge is the answer, returned word for word: asked with
      // `completeAnswer`, its text streams to callers that stream.
      const merged = completeAnswer({
        label: 'synthesis',
        model,
        messages: [message('system', merging), message('user', prompt)],
        sampling: {},
      });
      if (merged.outcome.tag === 'ok' && merged.outcome.val.content.trim() !== '') {
        return answer('synthesis', merged.outcome.val.content, sources, [`${answered.length} answers merged by ${model}.`, ...notes]);
      }
      notes.push(`Synthesizer ${model} failed: ${merged.outcome.tag === 'err' ? merged.outcome.val.message : 'empty answer'}`);
    }
    const sideBySide = answered.map((a) => `## ${a.model}\n\n${a.reply.content.trim()}`).join('\n\n');
    return answer('unmerged', sideBySide, sources, ['No synthesizer could merge the answers, so they are shown side by side.', ...notes]);
  },
};
