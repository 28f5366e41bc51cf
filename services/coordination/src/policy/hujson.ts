// HuJSON (JSON with // and /* */ comments and trailing commas, as Tailscale's policy file is written; reference:
// tailscale/hujson) read into a tree whose every value keeps its offset, so each later error can name the line and
// column of the value it is about. jsonc-parser does the scanning; this file only turns its errors into sentences and
// offsets into positions.
import jsonc from 'jsonc-parser';

/** A problem in a policy document, at the value it is about. Line and column count from 1. */
export interface PolicyError {
  line: number;
  column: number;
  message: string;
}

export type JsonNode = jsonc.Node;

/** Offsets → 1-based line and column (columns count UTF-16 units, as editors' positions do). */
export class LineIndex {
  private readonly starts: number[] = [0];

  constructor(text: string) {
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) this.starts.push(i + 1);
  }

  position(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - this.starts[lo] + 1 };
  }
}

const SYNTAX: Partial<Record<jsonc.ParseErrorCode, string>> = {
  [jsonc.ParseErrorCode.InvalidSymbol]: 'this is not valid JSON here',
  [jsonc.ParseErrorCode.InvalidNumberFormat]: 'this number is not written correctly',
  [jsonc.ParseErrorCode.PropertyNameExpected]: 'expected a key in double quotes',
  [jsonc.ParseErrorCode.ValueExpected]: 'expected a value',
  [jsonc.ParseErrorCode.ColonExpected]: 'expected a colon after the key',
  [jsonc.ParseErrorCode.CommaExpected]: 'expected a comma between the entries',
  [jsonc.ParseErrorCode.CloseBraceExpected]: 'expected } to close the object',
  [jsonc.ParseErrorCode.CloseBracketExpected]: 'expected ] to close the list',
  [jsonc.ParseErrorCode.EndOfFileExpected]: 'unexpected text after the end of the policy',
  [jsonc.ParseErrorCode.InvalidCommentToken]: 'this comment is not closed',
  [jsonc.ParseErrorCode.UnexpectedEndOfComment]: 'this comment is not closed',
  [jsonc.ParseErrorCode.UnexpectedEndOfString]: 'this string is not closed (a missing double quote?)',
  [jsonc.ParseErrorCode.UnexpectedEndOfNumber]: 'this number is cut off',
  [jsonc.ParseErrorCode.InvalidUnicode]: 'this \\u escape is not valid',
  [jsonc.ParseErrorCode.InvalidEscapeCharacter]: 'this escape in a string is not valid',
  [jsonc.ParseErrorCode.InvalidCharacter]: 'a control character inside a string must be escaped',
};

export interface HujsonDocument {
  root: JsonNode | undefined;
  errors: PolicyError[];
  lines: LineIndex;
}

/** Parses the text; syntax errors come back positioned, with the tree of whatever could be read. */
export function parseHujson(text: string): HujsonDocument {
  const lines = new LineIndex(text);
  const raw: jsonc.ParseError[] = [];
  // A byte-order mark some editors write is not part of the document (offsets still count it, so positions hold).
  const body = text.charCodeAt(0) === 0xfeff ? ` ${text.slice(1)}` : text;
  const root = jsonc.parseTree(body, raw, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: true });
  const errors = raw.map((e) => ({ ...lines.position(e.offset), message: SYNTAX[e.error] ?? `syntax error (${jsonc.printParseErrorCode(e.error)})` }));
  return { root, errors, lines };
}
