// The live page's Markdown: the answer rendered with markdown-it (vendor/markdown-it.min.js, bundled: no CDN).
//
// Safe by construction: raw HTML is off (`html: false`: `<img onerror=…>` is shown as text), no linkify, and a
// link is a link only to http:, https: or mailto: (anything else, `javascript:` included, stays text). Images are
// off: one is shown as a link to it, never loaded (a picture from anywhere would be a tracking pixel). Links open
// in a new tab without opener or referrer. markdown-it escapes every text it writes, so its HTML goes to the DOM.
//
// Linear enough for a long answer: blocks that can no longer change are rendered once and kept (a top-level
// block is final once two more have started after it: a later line cannot reach back into it); each render
// parses only the text after them. Except after a link reference definition, which reaches every block: then
// each render parses the whole text. Callers render at most once per animation frame (`schedule`), and never more
// often than every 2x the last render's duration.
//
// Invisible characters (tag characters, zero-width spaces and stray joiners, soft hyphens, Hangul fillers, bidi
// controls) are removed before anything is shown: stripInvisible, the rule of streamrelay/adapters/invisible.py (its docstring
// says which characters and why), written again here because the page gets the run's text as the agent sent it;
// with strip_invisible_markdown's part: a character reference outside code that markdown-it would decode into one
// of them is judged as that character (codeRanges finds fences and code spans; stripDecoded runs the rule again on
// what markdown-it decoded).
//
// window.streamrelayMarkdown = {AnswerView, stripInvisible, stripRule}: new AnswerView(element) with set(text),
// append(text), source, render() and schedule(afterRender); stripInvisible(markdown) -> markdown (character references
// judged outside code too); stripRule(text) -> text (characters only: for text shown as text).
"use strict";

(() => {
  const SAFE_LINK = /^(https?:|mailto:)/i;
  /** Top-level blocks kept open to later text (the last ones): "1. a\n\n2" becomes one list when ". b" comes. */
  const OPEN_BLOCKS = 2;
  /**
   * Container markers (quotes, list items) opened on one line past this depth are dropped before parsing:
   * markdown-it stops parsing blocks past `maxNesting` (100 levels) and drops the rest of the text, so an answer
   * could hide its end behind 150 '>' (the "Markdown source" view shows the text as written). Lines keep their
   * number: the offsets of kept blocks are counted in the text as written.
   */
  const DEEP = /^((?:[ \t]*(?:>|[-+*][ \t]|\d{1,9}[.)][ \t])){20})(?:[ \t]*(?:>|[-+*][ \t]|\d{1,9}[.)][ \t]))+/gm;

  // streamrelay/adapters/invisible.py's INVISIBLE, _EMOJI, _EMOJI_MODIFIER, _JOINING, _CJK and _VS_BASE (keep them
  // alike).
  const EMOJI = "\\u00A9\\u00AE\\u203C\\u2049\\u2122\\u2139\\u2194-\\u2199\\u21A9\\u21AA\\u231A-\\u23FF\\u24C2"
    + "\\u25AA-\\u27BF\\u2934\\u2935\\u2B05-\\u2B55\\u3030\\u303D\\u3297\\u3299\\u{1F000}-\\u{1FAFF}";
  const CJK = "\\u3400-\\u4DBF\\u4E00-\\u9FFF\\uF900-\\uFAFF\\u{20000}-\\u{3FFFF}";
  const VS_BASE = EMOJI + CJK + "\\u2200-\\u22FF\\u2A00-\\u2AFF\\u1000-\\u109F\\uAA60-\\uAA7F\\uA9E0-\\uA9FF"
    + "\\uA840-\\uA877";
  const VIRAMA = /[\u094D\u09CD\u0A4D\u0ACD\u0B4D\u0BCD\u0C4D\u0CCD\u0D4D\u0DCA\u1039\u17D2]/;
  const LTR_WORD = "0-9A-Za-z\\u00AA\\u00B5\\u00BA\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u02AF\\u0370-\\u03FF"
    + "\\u0400-\\u052F\\u1E00-\\u1FFF\\u3040-\\u30FF\\uAC00-\\uD7A3" + CJK;
  const INVISIBLE = new RegExp(
    "(\\u{1F3F4}\\u{E0067}\\u{E0062}(?:\\u{E0065}\\u{E006E}\\u{E0067}|\\u{E0073}\\u{E0063}\\u{E0074}"
    + "|\\u{E0077}\\u{E006C}\\u{E0073})\\u{E007F})"
    + "|([\\u200C\\u200D])"
    + "|(?<![" + VS_BASE + "#*0-9])[\\uFE00-\\uFE0F]"
    + "|(?<=[#*0-9])(?!\\uFE0F\\u20E3)[\\uFE00-\\uFE0F]"
    + "|(?<=[" + LTR_WORD + "])[\\u200E\\u200F\\u061C]+(?=[" + LTR_WORD + "])"
    + "|(?<![\\u1100-\\u115E\\uA960-\\uA97C])\\u1160|\\u115F(?![\\u1161-\\u11A7\\uD7B0-\\uD7C6])"
    + "|(?<![" + CJK + "])[\\u{E0100}-\\u{E01EF}]"
    + "|(?<![\\u1820-\\u18AF])[\\u180B-\\u180D\\u180F]"
    + "|(?<![\\u2800-\\u28FF])\\u2800+|\\u2800+(?![\\u2800-\\u28FF])"
    + "|[\\u00AD\\u034F\\u17B4\\u17B5\\u180E\\u3164\\uFFA0\\u200B\\u2060-\\u2064\\u206A-\\u206F"
    + "\\u202A-\\u202E\\u2066-\\u2069\\uFEFF\\uFFF9-\\uFFFB\\u{1BCA0}-\\u{1BCA3}\\u{1D173}-\\u{1D17A}"
    + "\\u{E0000}-\\u{E007F}]",
    "gu",
  );
  const EMOJI_BEFORE = new RegExp("[" + EMOJI + "][\\uFE0F\\u{1F3FB}-\\u{1F3FF}]?$", "u");
  const EMOJI_AFTER = new RegExp("^[" + EMOJI + "]", "u");
  const JOINING = /[\u0600-\u08FF\u0900-\u0DFF\u1000-\u109F\u1780-\u18AF\uA8E0-\uA8FF\uFB50-\uFDFF\uFE70-\uFEFE]/;

  function keepJoiner(text, at) {
    if (text[at] === "\u200D" && at > 0 && VIRAMA.test(text[at - 1])) return true;
    const after = text.slice(at + 1, at + 3);
    if (!after) return false;
    const emoji = EMOJI_AFTER.test(after) && EMOJI_BEFORE.test(text.slice(Math.max(0, at - 4), at));
    if (text[at] === "\u200D" && emoji) return true;
    return at > 0 && JOINING.test(text[at - 1]) && JOINING.test(after[0]);
  }

  /** `text` without invisible characters (streamrelay/adapters/invisible.py's rule). */
  function stripRule(text) {
    let current = String(text);
    for (;;) {
      const source = current;
      const next = source.replace(INVISIBLE, (match, flag, joiner, offset) => {
        if (flag !== undefined) return match;
        if (joiner !== undefined) return keepJoiner(source, offset) ? match : "";
        return "";
      });
      if (next === current) return current;
      current = next;
    }
  }

  // invisible.py's _RULED, NAMED_REFERENCES, _REFERENCE, markdown_code_ranges and strip_invisible_markdown: a
  // character reference markdown-it would decode into a character the rule looks at is judged as that character.
  const RULED = new RegExp(
    "^[\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5\\u180B-\\u180F\\u200B-\\u200F\\u202A-\\u202E"
    + "\\u2060-\\u2064\\u2066-\\u206F\\u2800\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0\\uFFF9-\\uFFFB"
    + "\\u{1BCA0}-\\u{1BCA3}\\u{1D173}-\\u{1D17A}\\u{E0000}-\\u{E01EF}]$",
    "u",
  );
  const NAMED = {
    ApplyFunction: "\u2061", af: "\u2061", InvisibleComma: "\u2063", ic: "\u2063", InvisibleTimes: "\u2062",
    it: "\u2062", NegativeMediumSpace: "\u200B", NegativeThickSpace: "\u200B", NegativeThinSpace: "\u200B",
    NegativeVeryThinSpace: "\u200B", ZeroWidthSpace: "\u200B", NoBreak: "\u2060", lrm: "\u200E", rlm: "\u200F",
    shy: "\u00AD", zwj: "\u200D", zwnj: "\u200C",
  };
  const REFERENCE = /&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));/g;
  const LINE_PREFIX = "^(?:[ \\t]*(?:>|[-+*][ \\t]|[0-9]{1,9}[.)][ \\t]))*[ \\t]{0,3}";
  const FENCE_OPEN = new RegExp(LINE_PREFIX + "(`{3,}|~{3,})([^\\n]*)$");
  const FENCE_CLOSE = new RegExp(LINE_PREFIX + "(`{3,}|~{3,})[ \\t]*$");
  const BLANK_LINE = /\n[ \t]*\n/;

  function reveal(text) {
    return text.replace(REFERENCE, (match, hex, decimal, name) => {
      let value;
      if (name !== undefined) {
        value = Object.prototype.hasOwnProperty.call(NAMED, name) ? NAMED[name] : undefined;
      } else {
        const number = hex !== undefined ? parseInt(hex, 16) : parseInt(decimal, 10);
        value = number <= 0x10FFFF ? String.fromCodePoint(number) : undefined;
      }
      return value !== undefined && RULED.test(value) ? value : match;
    });
  }

  /**
   * The code spans of text[start, end) (no fence in it), as offsets in `text`; linear (invisible.py's _code_spans):
   * the blank lines number each backtick run's paragraph (a span never crosses one), and each run length keeps a
   * cursor into its runs, only moved forward, to find an opener's closer: the next run of its length in its paragraph.
   */
  function codeSpans(text, start, end) {
    const part = text.slice(start, end);
    const runs = [];
    const run = /`+/g;
    for (let m = run.exec(part); m; m = run.exec(part)) runs.push([start + m.index, start + m.index + m[0].length]);
    const blank = new RegExp(BLANK_LINE.source, "g");
    const paragraph = new Array(runs.length);
    let k = 0;
    let blanks = 0;
    for (let m = blank.exec(part); m; m = blank.exec(part)) { // a blank line holds no backtick: it is between runs
      for (; k < runs.length && runs[k][0] < start + m.index; k += 1) paragraph[k] = blanks;
      blanks += 1;
    }
    for (; k < runs.length; k += 1) paragraph[k] = blanks;
    const byLength = new Map();
    runs.forEach(([runStart, runEnd], index) => {
      const length = runEnd - runStart;
      if (!byLength.has(length)) byLength.set(length, { runs: [], cursor: 0 });
      byLength.get(length).runs.push(index);
    });
    const spans = [];
    let i = 0;
    while (i < runs.length) {
      let runStart = runs[i][0];
      const runEnd = runs[i][1];
      const opener = i;
      i += 1;
      let slashes = 0;
      while (runStart - slashes > start && text[runStart - slashes - 1] === "\\") slashes += 1;
      if (slashes % 2) {
        runStart += 1;
        if (runStart === runEnd) continue;
      }
      const same = byLength.get(runEnd - runStart);
      if (same === undefined) continue;
      while (same.cursor < same.runs.length && same.runs[same.cursor] <= opener) same.cursor += 1;
      const closer = same.runs[same.cursor];
      if (closer !== undefined && paragraph[closer] === paragraph[opener]) {
        spans.push([runStart, runs[closer][1]]);
        i = closer + 1;
      }
    }
    return spans;
  }

  /** [start, end) offsets of the code markdown-it shows as written: fenced blocks, code spans (invisible.py). */
  function codeRanges(text) {
    const fences = [];
    let at = 0;
    let fence = null;
    for (const line of text.match(/[^\n]*\n|[^\n]+$/g) || []) {
      const body = line.replace(/\n$/, "").replace(/\r$/, "");
      if (fence === null) {
        const opened = FENCE_OPEN.exec(body);
        if (opened && !(opened[1][0] === "`" && opened[2].includes("`"))) fence = [opened[1][0], opened[1].length, at];
      } else {
        const closed = FENCE_CLOSE.exec(body);
        if (closed && closed[1][0] === fence[0] && closed[1].length >= fence[1]) {
          fences.push([fence[2], at + line.length]);
          fence = null;
        }
      }
      at += line.length;
    }
    if (fence !== null) fences.push([fence[2], text.length]);
    const ranges = [];
    let start = 0;
    for (const [fenceStart, fenceEnd] of [...fences, [text.length, text.length]]) {
      ranges.push(...codeSpans(text, start, fenceStart));
      if (fenceStart < fenceEnd) ranges.push([fenceStart, fenceEnd]);
      start = fenceEnd;
    }
    return ranges;
  }

  /** `text` without invisible characters (streamrelay/adapters/invisible.py's strip_invisible_markdown). */
  function stripInvisible(text) {
    let current = stripRule(text);
    while (current.includes("&")) { // until nothing changes: a removal can make a new reference
      if (reveal(current) === current) break; // no reference the rule looks at: no code ranges to find
      let out = "";
      let at = 0;
      for (const [start, end] of codeRanges(current)) {
        if (start < at) continue;
        out += reveal(current.slice(at, start)) + current.slice(start, end);
        at = end;
      }
      const next = stripRule(out + reveal(current.slice(at)));
      if (next === current) break;
      current = next;
    }
    return current;
  }

  /**
   * The rule again on what markdown-it decoded (text and link targets): where its reading of code differs from
   * codeRanges' (a backtick in a link target, a fence in an indented list item), a reference stripInvisible left as
   * written is decoded here, and so judged all the same. Code tokens are shown as written: left alone.
   */
  function stripDecoded(tokens) {
    for (const token of tokens) {
      if (token.type === "text") token.content = stripRule(token.content);
      if (token.attrs) {
        for (const attr of token.attrs) attr[1] = stripRule(attr[1]);
      }
      if (token.children) stripDecoded(token.children);
    }
    return tokens;
  }

  function shallow(text) {
    return stripInvisible(text).replace(DEEP, "$1");
  }

  function makeMarkdown() {
    const md = window.markdownit({ html: false, linkify: false, typographer: false, breaks: false });
    md.disable(["image"]);
    md.validateLink = (url) => SAFE_LINK.test(String(url).trim());
    const linkOpen = md.renderer.rules.link_open
      || ((tokens, idx, options, env, self) => self.renderToken(tokens, idx, options));
    md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
      tokens[idx].attrSet("target", "_blank");
      tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
      return linkOpen(tokens, idx, options, env, self);
    };
    return md;
  }

  /** The offset in `text` where line `line` (0-based) starts. */
  function lineOffset(text, line) {
    let offset = 0;
    for (let n = 0; n < line; n += 1) {
      const next = text.indexOf("\n", offset);
      if (next < 0) return text.length;
      offset = next + 1;
    }
    return offset;
  }

  class AnswerView {
    /** @param {HTMLElement} el where the rendered answer goes (its children are replaced). */
    constructor(el) {
      this.md = makeMarkdown();
      this.source = "";
      this.frozenChars = 0;
      this.frozen = document.createElement("div");
      this.frozen.className = "md-frozen";
      this.tail = document.createElement("div");
      this.tail.className = "md-tail";
      el.replaceChildren(this.frozen, this.tail);
      this.frame = 0;
      this.timer = 0;
      this.notBefore = 0;
      this.renders = 0;
      this.whole = false;
    }

    /** The whole answer is now `text` (blocks already rendered stay when it only grew). */
    set(text) {
      const kept = this.source.slice(0, this.frozenChars);
      this.source = text;
      if (!text.startsWith(kept)) {
        this.frozenChars = 0;
        this.frozen.replaceChildren();
      }
    }

    append(text) {
      this.source += text;
    }

    /** Render what changed since the last render. */
    render() {
      const started = performance.now();
      let tail = this.source.slice(this.frozenChars);
      let env = {};
      let tokens = stripDecoded(this.md.parse(shallow(tail), env));
      if (env.references && !this.whole) {
        // A link reference definition ("[1]: https://…") makes "[docs][1]" a link in any block, before or after
        // it: from now on every render parses the whole text (nothing kept), as a whole document is rendered.
        this.whole = true;
        if (this.frozenChars) {
          this.frozenChars = 0;
          this.frozen.replaceChildren();
          tail = this.source;
          env = {};
          tokens = stripDecoded(this.md.parse(shallow(tail), env));
        }
      }
      const starts = [];
      for (let i = 0; i < tokens.length; i += 1) {
        const token = tokens[i];
        if (token.level === 0 && token.nesting >= 0 && token.map) starts.push(i);
      }
      let open = 0;
      if (!this.whole && starts.length > OPEN_BLOCKS) {
        open = starts[starts.length - OPEN_BLOCKS];
        const html = this.md.renderer.render(tokens.slice(0, open), this.md.options, env);
        this.frozen.insertAdjacentHTML("beforeend", html);
        this.frozenChars += lineOffset(tail, tokens[open].map[0]);
      }
      this.tail.innerHTML = this.md.renderer.render(open ? tokens.slice(open) : tokens, this.md.options, env);
      this.renders += 1;
      const took = performance.now() - started;
      this.notBefore = performance.now() + 2 * took;
    }

    /** Render at the next animation frame (once, however many changes come before it); then `afterRender()`. */
    schedule(afterRender) {
      if (this.frame || this.timer) return;
      const run = () => {
        this.frame = 0;
        this.render();
        if (afterRender) afterRender();
      };
      const wait = this.notBefore - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = 0;
          this.frame = requestAnimationFrame(run);
        }, wait);
      } else {
        this.frame = requestAnimationFrame(run);
      }
    }
  }

  window.streamrelayMarkdown = { AnswerView, stripInvisible, stripRule };
})();
