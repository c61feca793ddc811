// {{name}}: a chorus synthesizer. It merges the answers with the plan's
// synthesizers (tried in order), and is honest about what it returns:
// `synthesis` of two or more answers, the lone survivor verbatim as
// `single`, `none` when nobody answered, `unmerged` (the answers side by
// side) when every synthesizer failed. Its sources are the call ids of the
// answers it merged.
//
//   [plugins.{{name}}.settings]
//   instructions = "Merge these answers into the best one."   # optional
//
// Return an error by throwing a string (a thrown Error object would trap).

import { complete, progress } from 'chorus:strategy/host@0.3.0';

const DEFAULT_INSTRUCTIONS = 'You are given a question and several answers to it. Write the single best answer: '
  + 'keep what they agree on, resolve their disagreements, drop what is wrong. Do not mention the other answers.';

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
const answer = (kind, text, sources, notes) => ({ kind, text, sources, notes, details: '' });

export const synthesizer = {
  validateSettings(settings) {
    parse(settings);
  },

  synthesize(request, plan, completions, settings) {
    const { instructions } = parse(settings);
    const notes = [];
    const answered = [];
    for (const c of completions) {
      if (c.outcome.tag === 'ok' && c.outcome.val.content.trim() !== '' && c.id !== undefined) {
        answered.push({ id: c.id, model: c.model, text: c.outcome.val.content });
      } else if (c.outcome.tag === 'ok') {
        notes.push(`${c.model} gave an empty answer.`);
      } else {
        notes.push(`${c.model} failed: ${c.outcome.val.message}`);
      }
    }
    if (answered.length === 0) return answer('none', `No model answered (${completions.length} tried).`, [], notes);
    if (answered.length === 1) {
      const [only] = answered;
      return answer('single', only.text, [only.id], [`Only ${only.model} answered, so this is its answer verbatim.`, ...notes]);
    }
    const sources = answered.map((a) => a.id);
    const prompt = `Question:\n${request.prompt}\n\n`
      + answered.map((a, n) => `--- Answer ${n + 1} ---\n${a.text.trim()}\n\n`).join('');
    for (const model of plan.synthesizers) {
      progress(`merging ${answered.length} answers with ${model}`);
      const [merged] = complete([{
        label: 'synthesis',
        model,
        messages: [message('system', instructions), message('user', prompt)],
        sampling: {},
      }]);
      if (merged.outcome.tag === 'ok' && merged.outcome.val.content.trim() !== '') {
        return answer('synthesis', merged.outcome.val.content, sources, [`${answered.length} answers merged by ${model}.`, ...notes]);
      }
      notes.push(`Synthesizer ${model} failed: ${merged.outcome.tag === 'err' ? merged.outcome.val.message : 'empty answer'}`);
    }
    const sideBySide = answered.map((a) => `## ${a.model}\n\n${a.text.trim()}`).join('\n\n');
    return answer('unmerged', sideBySide, sources, ['No synthesizer could merge the answers, so they are shown side by side.', ...notes]);
  },
};
