import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeXml, linearTicks, logTicks, renderPlotSvg } from './plot.js';
import { findXmlError } from '../../test/support/xml-check.js';

describe('renderPlotSvg', () => {
  const series = [
    {
      label: 'run <A> & "friends"',
      points: [
        { x: 1, throughput: 10, p95Ms: 100 },
        { x: 4, throughput: 35, p95Ms: 120 },
        { x: 2, throughput: 20, p95Ms: 101 },
        { x: 64, throughput: 40 },
      ],
      repPoints: [{ x: 4, throughput: 34, p95Ms: 119 }],
    },
    { label: 'run B', points: [{ x: 8, throughput: 50, p95Ms: 900 }] },
  ];

  it('draws a well-formed SVG with both panels, one line per series and panel, and a legend', () => {
    const svg = renderPlotSvg({ title: 'Ramp', xLabel: 'concurrency', series, sloP95Ms: 1000 });
    assert.equal(findXmlError(svg), undefined);
    assert.match(svg, /id="panel-throughput"/);
    assert.match(svg, /id="panel-p95"/);
    // Series A has four throughput points and three p95 points: a line in each panel. Series B has one point: no line.
    assert.equal((svg.match(/<polyline /g) ?? []).length, 2);
    assert.match(svg, /run &lt;A&gt; &amp; &quot;friends&quot;/);
    assert.match(svg, />run B</);
    assert.match(svg, /concurrency \(log scale\)/);
    assert.match(svg, /SLO 1000 ms/);
    assert.match(svg, /stroke-opacity="0.5"/, 'rep points are drawn');
  });

  it('uses a linear x axis over a narrow range and survives an empty plot', () => {
    const svg = renderPlotSvg({
      title: 't',
      xLabel: 'rate',
      series: [
        {
          label: 's',
          points: [
            { x: 2, throughput: 1 },
            { x: 3, throughput: 2 },
          ],
        },
      ],
    });
    assert.equal(findXmlError(svg), undefined);
    assert.doesNotMatch(svg, /log scale/);
    assert.equal(findXmlError(renderPlotSvg({ title: 'empty', xLabel: 'x', series: [] })), undefined);
  });

  it('keeps points inside their panel', () => {
    const svg = renderPlotSvg({ title: 't', xLabel: 'c', series });
    const circles = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[2])] as const);
    assert.ok(circles.length > 0);
    for (const [x, y] of circles) {
      assert.ok((x >= 80 && x <= 460) || (x >= 570 && x <= 950), `x ${x}`);
      assert.ok(y >= 56 && y <= 356, `y ${y}`);
    }
  });
});

describe('axis ticks', () => {
  it('picks round linear steps that cover the range', () => {
    assert.deepEqual(linearTicks(0, 23), [0, 5, 10, 15, 20, 25]);
    assert.deepEqual(linearTicks(0, 1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(linearTicks(0, 0), [0, 1]);
  });

  it('picks powers of two on a log axis, keeping both ends and dropping crowded ticks', () => {
    assert.deepEqual(logTicks(1, 100), [1, 2, 4, 8, 16, 32, 64, 100]);
    assert.deepEqual(logTicks(3.5, 64), [3.5, 8, 16, 32, 64]);
    assert.deepEqual(logTicks(1, 120), [1, 2, 4, 8, 16, 32, 64, 120]);
    assert.deepEqual(logTicks(1, 70), [1, 2, 4, 8, 16, 32, 70]);
    assert.deepEqual(logTicks(1, 100_000), [1, 10, 100, 1000, 10_000, 100_000]);
  });
});

describe('escapeXml', () => {
  it('escapes markup and drops characters XML forbids', () => {
    assert.equal(escapeXml(`a<b>&"c'\u0001`), 'a&lt;b&gt;&amp;&quot;c&apos;');
  });
});

describe('findXmlError', () => {
  it('accepts well-formed documents with a declaration, comments, CDATA and entities', () => {
    assert.equal(findXmlError('<?xml version="1.0"?>\n<!-- c --><a x="1" y=\'2\'><b/><![CDATA[<x>]]>&amp;&#65;&#x41;</a>\n'), undefined);
  });

  it('reports the usual defects', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /empty/],
      ['<a><b></a>', /does not match/],
      ['<a>', /Unclosed/],
      ['<a>&</a>', /Bare &/],
      ['<a>&nbsp;</a>', /Unknown entity/],
      ['<a x=1/>', /Unquoted/],
      ['<a x="1" x="2"/>', /Duplicate/],
      ['<a x="1"y="2"/>', /whitespace/],
      ['<a/><b/>', /More than one root/],
      ['text<a/>', /outside the root/],
      ['<a x="<"/>', /contains </],
      ['<a', /Unterminated start tag/],
      ['<a></a >', undefined as unknown as RegExp],
    ];
    for (const [text, pattern] of cases) {
      const error = findXmlError(text);
      if (pattern === undefined) assert.equal(error, undefined, text);
      else assert.match(error ?? '', pattern, text);
    }
  });
});
