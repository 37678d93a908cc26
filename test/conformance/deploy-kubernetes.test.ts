/**
 * deploy/kubernetes, checked without a cluster: every manifest against the Kubernetes and KEDA
 * schemas (kubernetes-models, @kubernetes-models/keda) and for unknown fields as a strict apply
 * would (test/support/kubernetes-fields.ts), then what the schemas cannot know: each
 * pool's config loads with voxmux's own schema, probes and ports match it, the grace period covers
 * the drain, selectors and references meet, and the autoscaling queries name real metrics.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Service } from 'kubernetes-models/v1/Service';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { unknownFieldProblems } from '../support/kubernetes-fields.js';

const DIR = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));

/** A parsed manifest: the schemas check its shape, so the checks below read its fields freely. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- YAML of many kinds, validated by kubernetes-models first
type Loose = any;
type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: Loose;
  data?: Loose;
};

/** The schema of each kind the manifests may use: its model's validate() throws on a violation. */
const MODELS: Record<string, (m: Manifest) => { validate(): void }> = {
  'apps/v1 Deployment': (m) => new Deployment(m as never),
  'v1 Service': (m) => new Service(m as never),
  'v1 ConfigMap': (m) => new ConfigMap(m as never),
  'v1 PersistentVolumeClaim': (m) => new PersistentVolumeClaim(m as never),
  'policy/v1 PodDisruptionBudget': (m) => new PodDisruptionBudget(m as never),
  'networking.k8s.io/v1 Ingress': (m) => new Ingress(m as never),
  'keda.sh/v1alpha1 ScaledObject': (m) => new ScaledObject(m as never),
};

function readManifests(): { file: string; manifest: Manifest }[] {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort()
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((doc) => {
        assert.deepEqual(doc.errors, [], `${file}: YAML errors`);
        return { file, manifest: doc.toJS() as Manifest };
      }),
    );
}

/** Every problem found in a set of manifests; empty when they are sound. */
export function checkManifests(manifests: { file: string; manifest: Manifest }[]): string[] {
  const problems: string[] = [];
  const byKind = (kind: string) => manifests.filter((m) => m.manifest.kind === kind).map((m) => m.manifest);
  for (const { file, manifest } of manifests) {
    const model = MODELS[`${manifest.apiVersion} ${manifest.kind}`];
    if (model === undefined) {
      problems.push(`${file}: no schema for ${manifest.apiVersion} ${manifest.kind}`);
      continue;
    }
    try {
      model(manifest).validate();
    } catch (err) {
      problems.push(`${file}: ${manifest.kind} ${manifest.metadata?.name}: ${(err as Error).message}`);
    }
  }
  problems.push(...unknownFieldProblems(manifests));
  if (problems.length > 0) return problems;

  const configMaps = byKind('ConfigMap');
  const deployments = byKind('Deployment');
  const metricNames = new Set(
    createMetrics()
      .registry.getMetricsAsArray()
      .map((m) => m.name),
  );
  for (const d of deployments) {
    const where = `Deployment ${d.metadata.name}`;
    const pod = d.spec.template.spec;
    const container = pod.containers[0];
    const matchLabels: Record<string, string> = d.spec.selector.matchLabels;
    for (const [k, v] of Object.entries(matchLabels)) {
      if (d.spec.template.metadata.labels?.[k] !== v) problems.push(`${where}: the pod template lacks selector label ${k}=${v}`);
    }
    // The voxmux config the container runs, loaded with the real schema.
    const configArg = container.args?.[container.args.indexOf('--config') + 1] as string | undefined;
    const mount = container.volumeMounts?.find((v: { mountPath: string }) => configArg?.startsWith(`${v.mountPath}/`));
    const volume = pod.volumes?.find((v: { name: string }) => v.name === mount?.name);
    const configMap = configMaps.find((c) => c.metadata.name === volume?.configMap?.name);
    const text = configMap?.data?.[configArg?.slice(mount.mountPath.length + 1) ?? ''] as string | undefined;
    if (text === undefined) {
      problems.push(`${where}: --config ${configArg} is not a file of a mounted ConfigMap`);
      continue;
    }
    let config: ReturnType<typeof loadConfig>;
    try {
      config = loadConfig({ file: JSON.parse(text), filePath: configArg, env: {}, flags: {} });
    } catch (err) {
      problems.push(`${where}: ${configArg}: ${(err as Error).message}`);
      continue;
    }
    if (config.gateway.host !== '0.0.0.0') problems.push(`${where}: gateway.host must be 0.0.0.0 in a pod, not ${config.gateway.host}`);
    const port = container.ports?.find((p: { name: string }) => p.name === 'http');
    if (port?.containerPort !== config.gateway.port)
      problems.push(`${where}: containerPort ${port?.containerPort} is not gateway.port ${config.gateway.port}`);
    const probes = { readinessProbe: '/health/ready', livenessProbe: '/health/live', startupProbe: '/health/ready' } as const;
    for (const [probe, path] of Object.entries(probes)) {
      const get = container[probe]?.httpGet;
      if (get?.path !== path || get?.port !== 'http') problems.push(`${where}: ${probe} must GET ${path} on port http`);
    }
    // The drain: the preStop pause, then pending requests (each bounded by its deadline), then
    // each instance's close timeout; the grace period must cover all of it.
    const preStopS = container.lifecycle?.preStop?.sleep?.seconds ?? 0;
    const drainS = preStopS + (config.gateway.requestTimeoutMs + config.supervisor.closeTimeoutMs) / 1000;
    const graceS = pod.terminationGracePeriodSeconds ?? 30;
    if (graceS < drainS) problems.push(`${where}: terminationGracePeriodSeconds ${graceS} < drain ${drainS} s`);
    if (pod.securityContext?.runAsNonRoot !== true) problems.push(`${where}: the pod must run as non-root`);
    if (pod.nodeSelector === undefined || Object.keys(pod.nodeSelector).length === 0) problems.push(`${where}: no nodeSelector`);
    const hasGpuModel = Object.values(config.models).some((m) => ['parakeet', 'vits'].includes(m.adapter));
    const gpus = Number(container.resources?.limits?.['nvidia.com/gpu'] ?? 0);
    if (hasGpuModel && !(gpus >= 1)) problems.push(`${where}: a GPU model without an nvidia.com/gpu limit`);
    if (hasGpuModel && !String(container.image).endsWith('-gpu')) problems.push(`${where}: a GPU model on image ${container.image}`);
  }
  const selects = (selector: Record<string, string>) =>
    deployments.filter((d) => Object.entries(selector).every(([k, v]) => d.spec.template.metadata.labels?.[k] === v));
  for (const s of byKind('Service')) {
    if (selects(s.spec.selector).length !== 1)
      problems.push(`Service ${s.metadata.name}: selects ${selects(s.spec.selector).length} Deployments`);
  }
  for (const p of byKind('PodDisruptionBudget')) {
    if (selects(p.spec.selector.matchLabels).length !== 1)
      problems.push(`PodDisruptionBudget ${p.metadata.name}: selects no single Deployment`);
  }
  const services = new Set(byKind('Service').map((s) => s.metadata.name));
  for (const ingress of byKind('Ingress')) {
    for (const rule of ingress.spec.rules) {
      for (const path of rule.http.paths) {
        if (!services.has(path.backend.service.name))
          problems.push(`Ingress ${ingress.metadata.name}: no Service ${path.backend.service.name}`);
      }
    }
  }
  for (const so of byKind('ScaledObject')) {
    const where = `ScaledObject ${so.metadata.name}`;
    if (!deployments.some((d) => d.metadata.name === so.spec.scaleTargetRef.name))
      problems.push(`${where}: no Deployment ${so.spec.scaleTargetRef.name}`);
    for (const trigger of so.spec.triggers) {
      for (const name of String(trigger.metadata?.query ?? '').match(/voxmux_[a-z_]+/g) ?? []) {
        if (!metricNames.has(name)) problems.push(`${where}: trigger ${trigger.name} queries ${name}, which voxmux does not export`);
      }
    }
  }
  return problems;
}

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  it('validate against the Kubernetes and KEDA schemas and agree with voxmux config, probes, drain and metrics', () => {
    const manifests = readManifests();
    const kinds = new Set(manifests.map((m) => m.manifest.kind));
    for (const kind of ['Deployment', 'Service', 'ConfigMap', 'PodDisruptionBudget', 'ScaledObject']) assert.ok(kinds.has(kind), kind);
    assert.deepEqual(checkManifests(manifests), []);
  });

  it('lists every manifest in kustomization.yaml', () => {
    const kustomization = parseAllDocuments(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8'))[0]!.toJS() as { resources: string[] };
    const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    assert.deepEqual([...kustomization.resources].sort(), files.sort());
  });

  it('scales the ASR pool to zero and back with the Prometheus scaler', () => {
    const so = readManifests().find((m) => m.manifest.kind === 'ScaledObject')!.manifest;
    assert.equal(so.spec.minReplicaCount, 0);
    assert.ok(so.spec.triggers.every((t: { type: string }) => t.type === 'prometheus'));
    assert.ok(
      so.spec.triggers.some((t: { metadata: { query: string } }) => !t.metadata.query.includes('voxmux_')),
      'a trigger that sees calls at zero pods',
    );
  });

  it('fails on invalid edits: a schema violation, an unknown field, a missing KEDA field, a short grace period, a wrong probe', () => {
    const edits: { what: string; edit: (m: Manifest) => void; expect: RegExp }[] = [
      {
        what: 'containerPort as a string',
        edit: (m) => m.kind === 'Deployment' && (m.spec.template.spec.containers[0].ports[0].containerPort = '8000'),
        expect: /containerPort must be integer/,
      },
      {
        what: 'ScaledObject without triggers',
        edit: (m) => m.kind === 'ScaledObject' && delete m.spec.triggers,
        expect: /must have required property triggers/,
      },
      {
        what: 'PodDisruptionBudget maxUnavailable as an object',
        edit: (m) => m.kind === 'PodDisruptionBudget' && (m.spec.maxUnavailable = { n: 1 }),
        expect: /maxUnavailable/,
      },
      {
        what: 'a misspelt Deployment field',
        edit: (m) => m.kind === 'Deployment' && ((m.spec.replica = m.spec.replicas), delete m.spec.replicas),
        expect: /Deployment voxmux-\w+: .*'"replica"' does not exist in type 'IDeploymentSpec'/,
      },
      {
        what: 'a misspelt field deep in a pod template',
        edit: (m) => m.kind === 'Deployment' && (m.spec.template.spec.containers[0].resources.limit = {}),
        expect: /'"limit"' does not exist in type 'IResourceRequirements'/,
      },
      {
        what: 'a misspelt ScaledObject trigger field',
        edit: (m) => m.kind === 'ScaledObject' && (m.spec.triggers[0].metdata = m.spec.triggers[0].metadata),
        expect: /ScaledObject voxmux-asr: .*'"metdata"' does not exist in type 'IScaleTriggers'/,
      },
      {
        what: 'grace period shorter than the drain',
        edit: (m) => m.kind === 'Deployment' && (m.spec.template.spec.terminationGracePeriodSeconds = 30),
        expect: /terminationGracePeriodSeconds 30 < drain 85 s/,
      },
      {
        what: 'readiness on /health/live',
        edit: (m) => m.kind === 'Deployment' && (m.spec.template.spec.containers[0].readinessProbe.httpGet.path = '/health/live'),
        expect: /readinessProbe must GET \/health\/ready/,
      },
      {
        what: 'an unknown field in the voxmux config',
        edit: (m) => m.kind === 'ConfigMap' && (m.data['asr.json'] = m.data['asr.json'].replace('"instances": 2', '"instancez": 2')),
        expect: /instancez/,
      },
      {
        what: 'a query on a metric voxmux does not export',
        edit: (m) => m.kind === 'ScaledObject' && (m.spec.triggers[0].metadata.query = 'sum(voxmux_no_such_metric)'),
        expect: /voxmux_no_such_metric, which voxmux does not export/,
      },
    ];
    for (const { what, edit, expect } of edits) {
      const manifests = readManifests();
      for (const m of manifests) edit(m.manifest);
      const problems = checkManifests(manifests);
      assert.ok(problems.length > 0, `${what}: no problem found`);
      assert.match(problems.join('\n'), expect, what);
    }
  });
});
