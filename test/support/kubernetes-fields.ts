/**
 * Unknown fields in Kubernetes manifests, as `kubectl apply --validate=strict` rejects them. The
 * JSON-schema validators of kubernetes-models accept a misspelt field (the schemas do not close
 * their objects), so each manifest is type-checked instead against the same package's types
 * (and @kubernetes-models/keda's for KEDA): the TypeScript compiler, given the manifest as an
 * object literal of the kind's interface, reports a property the interface does not declare, at
 * any depth (the compiler names the first it meets in each manifest). Fields that a schema leaves open (labels, annotations, ConfigMap data, a CRD's
 * preserved fields) are index signatures there and stay open here.
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The interface of each kind, by `apiVersion kind`: [module, interface]. */
const TYPES: Record<string, [string, string]> = {
  'apps/v1 Deployment': ['kubernetes-models/apps/v1/Deployment', 'IDeployment'],
  'v1 Service': ['kubernetes-models/v1/Service', 'IService'],
  'v1 ConfigMap': ['kubernetes-models/v1/ConfigMap', 'IConfigMap'],
  'v1 PersistentVolumeClaim': ['kubernetes-models/v1/PersistentVolumeClaim', 'IPersistentVolumeClaim'],
  'policy/v1 PodDisruptionBudget': ['kubernetes-models/policy/v1/PodDisruptionBudget', 'IPodDisruptionBudget'],
  'networking.k8s.io/v1 Ingress': ['kubernetes-models/networking.k8s.io/v1/Ingress', 'IIngress'],
  'keda.sh/v1alpha1 ScaledObject': ['@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject', 'IScaledObject'],
};

/** A file name the compiler resolves packages from (the repository's node_modules); it is never written. */
const VIRTUAL = fileURLToPath(new URL('../conformance/kubernetes-manifests.virtual.ts', import.meta.url));

export interface NamedManifest {
  /** Where the manifest came from, for the problem's text. */
  file: string;
  manifest: { apiVersion: string; kind: string; metadata?: { name?: string } };
}

/** A line for each manifest with a field its kind does not declare (or of a kind this check does not know); empty when none. */
export function unknownFieldProblems(manifests: readonly NamedManifest[]): string[] {
  const problems: string[] = [];
  const lines: string[] = [];
  const owners: { firstLine: number; where: string }[] = [];
  manifests.forEach(({ file, manifest }, i) => {
    const where = `${file}: ${manifest.kind} ${manifest.metadata?.name ?? '(unnamed)'}`;
    const type = TYPES[`${manifest.apiVersion} ${manifest.kind}`];
    if (type === undefined) {
      problems.push(`${where}: no type for ${manifest.apiVersion} ${manifest.kind}`);
      return;
    }
    lines.push(`import type { ${type[1]} as T${i} } from '${type[0]}';`);
    owners.push({ firstLine: lines.length, where });
    lines.push(...`export const m${i}: T${i} = ${JSON.stringify(manifest, null, 2)};`.split('\n'));
  });
  const text = lines.join('\n');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === VIRTUAL ? ts.createSourceFile(name, text, language) : getSourceFile(name, language, ...rest);
  host.fileExists = (
    (fileExists) => (name: string) =>
      name === VIRTUAL || fileExists(name)
  )(host.fileExists.bind(host));
  const program = ts.createProgram([VIRTUAL], options, host);
  const source = program.getSourceFile(VIRTUAL);
  for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
    const line =
      diagnostic.file === undefined || diagnostic.start === undefined
        ? 0
        : diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line;
    const owner = owners.findLast((o) => o.firstLine <= line);
    problems.push(`${owner?.where ?? '(manifests)'}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`);
  }
  return problems;
}
