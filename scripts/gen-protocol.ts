/**
 * Writes host/voxmux_host/messages.py from the message table (src/protocol/message-table.ts):
 * a frozen dataclass per named struct and per message, with `to_meta()` and `from_meta()`, and the
 * tables tag → class, name, direction and body layout. Run through `npm run docs`.
 *
 * `describeTable()` is the table in a small type vocabulary ('string', 'integer', 'number',
 * 'boolean', 'JsonObject', a struct name, `'a'|'b'`, `X[]`, `X|null`); a conformance test compares
 * it with the Python side's own description (voxmux_host.protocol.describe_messages).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Kind, type TObject, type TSchema } from '@sinclair/typebox';
import { PROTOCOL_VERSION } from '../src/protocol/frame.js';
import { MESSAGE_NAMES, MESSAGE_TABLE, NAMED_STRUCTS, type BodyLayout, type Direction } from '../src/protocol/message-table.js';

export const PYTHON_MESSAGES_PATH = fileURLToPath(new URL('../host/voxmux_host/messages.py', import.meta.url));

type FieldType =
  | { kind: 'string' | 'integer' | 'number' | 'boolean' | 'json' }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'struct'; name: string }
  | { kind: 'array'; of: FieldType }
  | { kind: 'nullable'; of: FieldType };

/** Classifies a meta field's schema; throws for anything the Python side cannot express. */
function fieldType(schema: TSchema, where: string): FieldType {
  if (schema.$id === 'JsonObject') return { kind: 'json' };
  switch (schema[Kind] as string) {
    case 'String':
      return { kind: 'string' };
    case 'Integer':
      if (schema.minimum !== 0) throw new Error(`${where}: integers must be Count() (minimum 0)`);
      return { kind: 'integer' };
    case 'Number':
      return { kind: 'number' };
    case 'Boolean':
      return { kind: 'boolean' };
    case 'Object':
      if (typeof schema.$id !== 'string') throw new Error(`${where}: a nested object needs a $id`);
      if (schema.additionalProperties !== false) throw new Error(`${where}: struct ${schema.$id} must be strict`);
      return { kind: 'struct', name: schema.$id };
    case 'Array':
      return { kind: 'array', of: fieldType(schema.items as TSchema, `${where}[]`) };
    case 'Union': {
      const members = schema.anyOf as TSchema[];
      const nonNull = members.filter((m) => m[Kind] !== 'Null');
      if (nonNull.length > 0 && nonNull.every((m) => m[Kind] === 'Literal' && typeof m.const === 'string')) {
        const values = nonNull.map((m) => m.const as string);
        const enumType: FieldType = { kind: 'enum', values };
        return nonNull.length < members.length ? { kind: 'nullable', of: enumType } : enumType;
      }
      if (members.length === 2 && nonNull.length === 1) return { kind: 'nullable', of: fieldType(nonNull[0]!, where) };
      throw new Error(`${where}: a union must be string literals, or one type and null`);
    }
    default:
      throw new Error(`${where}: type ${String(schema[Kind])} is not allowed in the message table`);
  }
}

function describe(type: FieldType): string {
  switch (type.kind) {
    case 'json':
      return 'JsonObject';
    case 'enum':
      return type.values.map((v) => `'${v}'`).join('|');
    case 'struct':
      return type.name;
    case 'array': {
      const inner = describe(type.of);
      return type.of.kind === 'nullable' || type.of.kind === 'enum' ? `(${inner})[]` : `${inner}[]`;
    }
    case 'nullable':
      return `${describe(type.of)}|null`;
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return type.kind;
  }
}

function fieldsOf(object: TObject, where: string): [string, FieldType][] {
  return Object.entries(object.properties).map(([key, schema]) => [key, fieldType(schema, `${where}.${key}`)]);
}

export interface TableDescription {
  messages: { name: string; tag: number; direction: Direction; body: BodyLayout; meta: [string, string][] }[];
  structs: Record<string, [string, string][]>;
}

/** The table in the shared type vocabulary, messages in tag order, struct fields in wire order. */
export function describeTable(): TableDescription {
  const messages = MESSAGE_NAMES.map((name) => {
    const spec = MESSAGE_TABLE[name];
    const meta = fieldsOf(spec.meta, name).map(([key, type]): [string, string] => [key, describe(type)]);
    return { name, tag: spec.tag, direction: spec.direction, body: spec.body, meta };
  }).sort((a, b) => a.tag - b.tag);
  const structs: Record<string, [string, string][]> = {};
  for (const struct of NAMED_STRUCTS) {
    const name = struct.$id!;
    structs[name] = fieldsOf(struct, name).map(([key, type]): [string, string] => [key, describe(type)]);
  }
  return { messages, structs };
}

// ---------------------------------------------------------------------------------------------
// Python

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const constant = (name: string) => snake(name).toUpperCase().replace(/^_/, '');

/** Literal aliases, one per distinct set of values, named after the first field that uses it. */
class Enums {
  readonly aliases = new Map<string, { alias: string; values: readonly string[] }>();

  alias(values: readonly string[], owner: string, field: string, isArray: boolean): string {
    const key = values.join('\u0000');
    let entry = this.aliases.get(key);
    if (entry === undefined) {
      const base = isArray ? field.replace(/s$/, '') : field; // workKinds: one WorkKind each
      entry = { alias: owner + base[0]!.toUpperCase() + base.slice(1), values };
      this.aliases.set(key, entry);
    }
    return entry.alias;
  }
}

function pyType(type: FieldType, enums: Enums, owner: string, field: string, isArray = false): string {
  switch (type.kind) {
    case 'string':
      return 'str';
    case 'integer':
      return 'int';
    case 'number':
      return 'float';
    case 'boolean':
      return 'bool';
    case 'json':
      return 'Dict[str, Any]';
    case 'enum':
      return enums.alias(type.values, owner, field, isArray);
    case 'struct':
      return type.name;
    case 'array':
      return `Tuple[${pyType(type.of, enums, owner, field, true)}, ...]`;
    case 'nullable':
      return `Optional[${pyType(type.of, enums, owner, field, isArray)}]`;
  }
}

function pyParser(type: FieldType, enums: Enums, owner: string, field: string, isArray = false): string {
  switch (type.kind) {
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return `read_${type.kind}`;
    case 'json':
      return 'read_json_object';
    case 'enum':
      return `read_enum(${constant(enums.alias(type.values, owner, field, isArray))}_VALUES)`;
    case 'struct':
      return `${type.name}.from_meta`;
    case 'array':
      return `read_array(${pyParser(type.of, enums, owner, field, true)})`;
    case 'nullable':
      return `read_optional(${pyParser(type.of, enums, owner, field, isArray)})`;
  }
}

function pyClass(name: string, object: TObject, enums: Enums, message?: { tag: number; direction: Direction; body: BodyLayout }): string[] {
  const fields = fieldsOf(object, name);
  const hasBody = message !== undefined && message.body !== 'none';
  const lines: string[] = ['', '', '@dataclass(frozen=True)', `class ${name}(Record):`];
  if (message === undefined) lines.push(`    """Struct ${name} (docs/protocol.md)."""`, '');
  else {
    const tag = `0x${message.tag.toString(16).padStart(2, '0').toUpperCase()}`;
    lines.push(
      `    """${name} (tag ${tag}, ${message.direction}, body ${message.body})."""`,
      '',
      `    WIRE: ClassVar[Optional[Wire]] = Wire(${tag}, '${name}', '${message.direction}', '${message.body}')`,
    );
  }
  lines.push(
    ...pyTuple(
      '    FIELDS: ClassVar[Fields] = ',
      fields.map(([key, type]) => `('${key}', ${pyParser(type, enums, name, key)})`),
    ),
  );
  if (fields.length > 0 || hasBody) lines.push('');
  for (const [key, type] of fields) lines.push(`    ${snake(key)}: ${pyType(type, enums, name, key)}`);
  if (hasBody) lines.push('    body: Body');
  return lines;
}

/** `prefix(a, b)` on one line when it fits in 110 columns, otherwise one item a line. */
function pyTuple(prefix: string, items: readonly string[], brackets = '()'): string[] {
  const [open, close] = [brackets[0]!, brackets[1]!];
  const oneLine = `${prefix}${open}${items.join(', ')}${items.length === 1 && open === '(' ? ',' : ''}${close}`;
  if (oneLine.length <= 110) return [oneLine];
  const indent = ' '.repeat(prefix.length - prefix.trimStart().length + 4);
  return [`${prefix}${open}`, ...items.map((item) => `${indent}${item},`), `${' '.repeat(indent.length - 4)}${close}`];
}

/** The text of host/voxmux_host/messages.py. */
export function renderPythonMessages(): string {
  const enums = new Enums();
  const body: string[] = [];
  const structNames = new Set<string>();
  for (const struct of NAMED_STRUCTS) {
    const name = struct.$id!;
    if (structNames.has(name)) throw new Error(`Two structs are named ${name}`);
    structNames.add(name);
    body.push(...pyClass(name, struct, enums));
  }
  const byTag = [...MESSAGE_NAMES].sort((a, b) => MESSAGE_TABLE[a].tag - MESSAGE_TABLE[b].tag);
  for (const name of byTag) {
    if (structNames.has(name)) throw new Error(`Message ${name} has the name of a struct`);
    body.push(...pyClass(name, MESSAGE_TABLE[name].meta, enums, MESSAGE_TABLE[name]));
  }
  const down = byTag.filter((n) => MESSAGE_TABLE[n].direction === 'down');
  const up = byTag.filter((n) => MESSAGE_TABLE[n].direction === 'up');
  const hex = (tag: number) => `0x${tag.toString(16).padStart(2, '0').toUpperCase()}`;
  const lines = [
    '# Generated from src/protocol/message-table.ts by `npm run docs`: do not edit.',
    `"""The messages of the instance protocol, version ${PROTOCOL_VERSION} (docs/protocol.md).`,
    '',
    'One frozen dataclass per named struct and per message, fields in wire order with snake_case names;',
    "``FIELDS`` pairs each wire key with its parser, and a message's ``WIRE`` gives its tag, name,",
    'direction and body layout. ``to_meta()`` and ``from_meta()`` come from ``protocol.Record``. A message',
    "whose body layout is not 'none' also holds ``body``. Frames, body checks and the shortcuts",
    '``encode_message``/``decode_message`` are in ``protocol.py``.',
    '"""',
    'from __future__ import annotations',
    '',
    'from dataclasses import dataclass',
    'from typing import Any, ClassVar, Dict, FrozenSet, Literal, Optional, Tuple, Type, Union',
    '',
    'from .protocol import (',
    '    Body,',
    '    Fields,',
    '    Record,',
    '    Wire,',
    '    read_array,',
    '    read_boolean,',
    '    read_enum,',
    '    read_integer,',
    '    read_json_object,',
    '    read_number,',
    '    read_optional,',
    '    read_string,',
    ')',
  ];
  // Enum aliases must exist before the classes: collect them by rendering first.
  const aliasLines: string[] = [''];
  for (const { alias, values } of enums.aliases.values()) {
    const literals = values.map((v) => `'${v}'`);
    aliasLines.push(
      '',
      ...pyTuple(`${alias} = Literal`, literals, '[]'),
      ...pyTuple(`${constant(alias)}_VALUES: Tuple[${alias}, ...] = `, literals),
    );
  }
  const tables = [
    '',
    '',
    '# Message tags. Down: supervisor -> instance. Up: instance -> supervisor.',
    ...byTag.map((n) => `TAG_${constant(n)} = ${hex(MESSAGE_TABLE[n].tag)}`),
    '',
    ...pyTuple('ControllerMessage = Union', down, '[]'),
    ...pyTuple('HostMessage = Union', up, '[]'),
    'Message = Union[ControllerMessage, HostMessage]',
    '',
    'MESSAGE_CLASSES: Dict[int, Type[Any]] = {',
    ...byTag.map((n) => `    ${hex(MESSAGE_TABLE[n].tag)}: ${n},`),
    '}',
    'MESSAGE_NAMES: Dict[int, str] = {tag: cls.WIRE.name for tag, cls in MESSAGE_CLASSES.items()}',
    'DIRECTIONS: Dict[int, str] = {tag: cls.WIRE.direction for tag, cls in MESSAGE_CLASSES.items()}',
    'BODY_LAYOUTS: Dict[int, str] = {tag: cls.WIRE.body_layout for tag, cls in MESSAGE_CLASSES.items()}',
    "CONTROLLER_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'down')",
    "HOST_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'up')",
    'KNOWN_TAGS: FrozenSet[int] = CONTROLLER_TAGS | HOST_TAGS',
    ...pyTuple('STRUCT_CLASSES: Tuple[Type[Any], ...] = ', [...structNames]),
  ];
  return [...lines, ...aliasLines, ...body, ...tables].join('\n') + '\n';
}

export function writePythonMessages(): void {
  writeFileSync(PYTHON_MESSAGES_PATH, renderPythonMessages());
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) writePythonMessages();
