/**
 * A small XML well-formedness check: one root element, balanced and properly nested tags,
 * quoted and unique attributes, known or numeric entity references, no stray `<` or `&`. It is
 * no validating parser; it catches the mistakes a hand-written SVG can make. Tests check the
 * bench's plots with it (bench/cli/plot.ts, compare.ts and the files `voxmux bench` writes).
 */

/** The first well-formedness error, or undefined when the text is well-formed. */
export function findXmlError(text: string): string | undefined {
  const stack: string[] = [];
  let rootCount = 0;
  let i = 0;
  const name = /^[A-Za-z_:][-A-Za-z0-9_:.]*/;
  const where = (): string => `at offset ${i}`;
  if (text.trim().length === 0) return 'The document is empty';
  while (i < text.length) {
    const lt = text.indexOf('<', i);
    const chunk = lt === -1 ? text.slice(i) : text.slice(i, lt);
    const charError = checkCharData(chunk);
    if (charError !== undefined) return `${charError} ${where()}`;
    if (stack.length === 0 && chunk.trim().length > 0) return `Text outside the root element ${where()}`;
    if (lt === -1) break;
    i = lt;
    if (text.startsWith('<?', i)) {
      const end = text.indexOf('?>', i);
      if (end === -1) return `Unterminated processing instruction ${where()}`;
      if (text.startsWith('<?xml', i) && i !== 0) return `XML declaration not at the start ${where()}`;
      i = end + 2;
      continue;
    }
    if (text.startsWith('<!--', i)) {
      const end = text.indexOf('-->', i + 4);
      if (end === -1) return `Unterminated comment ${where()}`;
      i = end + 3;
      continue;
    }
    if (text.startsWith('<![CDATA[', i)) {
      if (stack.length === 0) return `CDATA outside the root element ${where()}`;
      const end = text.indexOf(']]>', i);
      if (end === -1) return `Unterminated CDATA section ${where()}`;
      i = end + 3;
      continue;
    }
    if (text.startsWith('<!DOCTYPE', i)) {
      if (rootCount > 0 || stack.length > 0) return `DOCTYPE after the root element ${where()}`;
      const end = text.indexOf('>', i);
      if (end === -1) return `Unterminated DOCTYPE ${where()}`;
      i = end + 1;
      continue;
    }
    if (text.startsWith('</', i)) {
      const match = name.exec(text.slice(i + 2));
      if (match === null) return `Malformed end tag ${where()}`;
      const close = text.indexOf('>', i);
      if (close === -1 || text.slice(i + 2 + match[0].length, close).trim() !== '') return `Malformed end tag ${where()}`;
      const open = stack.pop();
      if (open !== match[0]) return `End tag </${match[0]}> does not match <${open ?? 'nothing'}> ${where()}`;
      i = close + 1;
      continue;
    }
    const match = name.exec(text.slice(i + 1));
    if (match === null) return `Malformed start tag ${where()}`;
    const tag = match[0];
    let j = i + 1 + tag.length;
    const seen = new Set<string>();
    let isSelfClosing = false;
    for (;;) {
      const spaceStart = j;
      while (/\s/.test(text[j] ?? '')) j += 1;
      if (text[j] === '>') {
        j += 1;
        break;
      }
      if (text.startsWith('/>', j)) {
        isSelfClosing = true;
        j += 2;
        break;
      }
      if (j >= text.length) return `Unterminated start tag <${tag}> ${where()}`;
      if (j === spaceStart) return `Expected whitespace before an attribute in <${tag}> ${where()}`;
      const attr = name.exec(text.slice(j));
      if (attr === null) return `Malformed attribute in <${tag}> ${where()}`;
      if (seen.has(attr[0])) return `Duplicate attribute ${attr[0]} in <${tag}> ${where()}`;
      seen.add(attr[0]);
      j += attr[0].length;
      while (/\s/.test(text[j] ?? '')) j += 1;
      if (text[j] !== '=') return `Expected = after attribute ${attr[0]} in <${tag}> ${where()}`;
      j += 1;
      while (/\s/.test(text[j] ?? '')) j += 1;
      const quote = text[j];
      if (quote !== '"' && quote !== "'") return `Unquoted attribute ${attr[0]} in <${tag}> ${where()}`;
      const end = text.indexOf(quote, j + 1);
      if (end === -1) return `Unterminated attribute ${attr[0]} in <${tag}> ${where()}`;
      const value = text.slice(j + 1, end);
      if (value.includes('<')) return `Attribute ${attr[0]} in <${tag}> contains < ${where()}`;
      const valueError = checkCharData(value);
      if (valueError !== undefined) return `${valueError} in attribute ${attr[0]} ${where()}`;
      j = end + 1;
    }
    if (stack.length === 0) {
      rootCount += 1;
      if (rootCount > 1) return `More than one root element ${where()}`;
    }
    if (!isSelfClosing) stack.push(tag);
    i = j;
  }
  if (stack.length > 0) return `Unclosed element <${stack.at(-1)}>`;
  if (rootCount === 0) return 'No root element';
  return undefined;
}

function checkCharData(text: string): string | undefined {
  let at = text.indexOf('&');
  while (at !== -1) {
    const semi = text.indexOf(';', at);
    if (semi === -1) return 'Bare &';
    const ref = text.slice(at + 1, semi);
    if (!/^(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+)$/.test(ref)) return `Unknown entity &${ref};`;
    at = text.indexOf('&', semi);
  }
  if (text.includes(']]>')) return 'The sequence ]]> in text';
  return undefined;
}
