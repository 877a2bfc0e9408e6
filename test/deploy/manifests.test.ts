// The Kubernetes manifests (deploy/), validated offline: every object kustomize renders is checked
// against the Kubernetes API schemas (npm kubernetes-models), and the operational rules of
// deploy/README.md are checked on the rendered objects (limits, probes, PDBs, HPA, NetworkPolicy,
// the migration Job, JetStream R3, PostgreSQL by CloudNativePG or an external URL).
//
// The renders live in deploy/rendered/ (kept in git, like generated code). Where kubectl is
// installed, the test renders every kustomization afresh and fails if the kept renders are stale
// (`bash deploy/validate.sh deploy/rendered` refreshes them); elsewhere it validates the kept ones.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

const RENDERS = ['base', 'nats', 'overlays-local', 'overlays-production', 'overlays-cnpg'] as const;
const KEPT = join(REPO_ROOT, 'deploy/rendered');

type K8s = Record<string, any>;

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
let fresh: string | undefined;

beforeAll(() => {
  if (!hasKubectl) {
    console.info(
      'kubectl not installed: validating the kept renders in deploy/rendered without re-rendering',
    );
    return;
  }
  fresh = mkdtempSync(join(tmpdir(), 'mcs-deploy-'));
  execFileSync('bash', [join(REPO_ROOT, 'deploy/validate.sh'), fresh], { stdio: 'pipe' });
});
afterAll(() => {
  if (fresh) rmSync(fresh, { recursive: true, force: true });
});

function load(name: string): K8s[] {
  const text = readFileSync(join(KEPT, `${name}.yaml`), 'utf8');
  return parseAllDocuments(text)
    .map((d) => d.toJS() as K8s)
    .filter(Boolean);
}

/** The kubernetes-models class of an object, e.g. apps/v1 Deployment → kubernetes-models/apps/v1/Deployment. */
async function modelOf(o: K8s): Promise<(new (data: K8s) => { validate(): void }) | undefined> {
  const path = `kubernetes-models/${o.apiVersion}/${o.kind}`;
  try {
    const mod = (await import(path)) as Record<string, new (data: K8s) => { validate(): void }>;
    return mod[o.kind];
  } catch {
    return undefined;
  }
}

/**
 * CloudNativePG's Cluster is a custom resource (no kubernetes-models package): its fields that
 * this repository sets are checked against the operator's v1 API here.
 */
function validateCnpgCluster(o: K8s): void {
  const spec = o.spec as K8s;
  expect(Object.keys(spec).sort()).toEqual(expect.arrayContaining(['instances', 'storage', 'bootstrap']));
  const known = [
    'instances',
    'imageName',
    'primaryUpdateStrategy',
    'postgresql',
    'bootstrap',
    'storage',
    'affinity',
    'resources',
  ];
  for (const k of Object.keys(spec)) expect(known, `unknown Cluster field spec.${k}`).toContain(k);
  expect(Number.isInteger(spec.instances) && spec.instances >= 1).toBe(true);
  expect(['unsupervised', 'supervised']).toContain(spec.primaryUpdateStrategy);
  expect(spec.storage.size).toMatch(/^\d+(Ki|Mi|Gi|Ti)$/);
  for (const v of Object.values(spec.postgresql.parameters)) expect(typeof v).toBe('string');
  expect(['required', 'preferred']).toContain(spec.affinity.podAntiAffinityType);
}

describe.each(RENDERS)('deploy/%s', (name) => {
  it.skipIf(!hasKubectl)('is what kustomize renders today (when kubectl is installed)', () => {
    if (!fresh) throw new Error('kubectl is installed but nothing was rendered');
    const kept = readFileSync(join(KEPT, `${name}.yaml`), 'utf8');
    const now = readFileSync(join(fresh, `${name}.yaml`), 'utf8');
    expect(
      now === kept,
      `deploy/rendered/${name}.yaml is stale: run bash deploy/validate.sh deploy/rendered`,
    ).toBe(true);
  });

  it('validates every object against the Kubernetes schemas', async () => {
    const objects = load(name);
    expect(objects.length).toBeGreaterThan(0);
    for (const o of objects) {
      const label = `${o.kind} ${o.metadata?.name}`;
      if (o.apiVersion === 'postgresql.cnpg.io/v1' && o.kind === 'Cluster') {
        validateCnpgCluster(o);
        continue;
      }
      const Model = await modelOf(o);
      expect(Model, `no Kubernetes schema for ${o.apiVersion} ${label}`).toBeDefined();
      // Secret data is base64; kubectl wraps long values over lines, which the API server's
      // decoder skips, so the schema's strict format check gets them without line breaks.
      const data =
        o.kind === 'Secret' && o.data
          ? {
              ...o,
              data: Object.fromEntries(
                Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, v.replace(/\s+/g, '')]),
              ),
            }
          : o;
      try {
        new Model!(data).validate();
      } catch (err) {
        throw new Error(`${name}: ${label}: ${(err as Error).message}`);
      }
    }
  });
});

/** The workloads of a render: Deployments, StatefulSets and Jobs with their pod specs. */
function workloads(objects: K8s[]) {
  return objects
    .filter((o) => ['Deployment', 'StatefulSet', 'Job'].includes(o.kind))
    .map((o) => ({ o, pod: o.spec.template.spec as K8s, labels: o.spec.template.metadata.labels as K8s }));
}

const matches = (selector: K8s, labels: K8s) =>
  Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);

describe.each(['overlays-local', 'overlays-production', 'overlays-cnpg'] as const)(
  'deploy/%s, the rules of deploy/README.md',
  (name) => {
    const objects = () => load(name);

    it('gives every container resource requests and limits, and runs it non-root on a read-only root', () => {
      for (const { o, pod } of workloads(objects())) {
        for (const c of pod.containers as K8s[]) {
          const where = `${o.kind} ${o.metadata.name} container ${c.name}`;
          for (const kind of ['requests', 'limits'])
            for (const r of ['cpu', 'memory'])
              expect(c.resources?.[kind]?.[r], `${where} ${kind}.${r}`).toBeDefined();
          expect(pod.securityContext?.runAsNonRoot ?? c.securityContext?.runAsNonRoot, where).toBe(true);
          expect(c.securityContext?.allowPrivilegeEscalation, where).toBe(false);
          expect(c.securityContext?.readOnlyRootFilesystem, where).toBe(true);
        }
      }
    });

    it('mounts a writable /tmp in every part of ours, where the image keeps Node’s compile cache', () => {
      const dockerfile = readFileSync(join(REPO_ROOT, 'deploy/Dockerfile'), 'utf8');
      const cacheDir = /NODE_COMPILE_CACHE=(\S+)/.exec(dockerfile)?.[1];
      expect(cacheDir, 'NODE_COMPILE_CACHE in the image').toMatch(/^\/tmp\//);
      // Long-running parts only: the migrations Job runs once.
      for (const { o, pod } of workloads(objects()).filter((w) => w.o.kind !== 'Job')) {
        for (const c of (pod.containers as K8s[]).filter((c) => c.image?.includes('mcs'))) {
          const where = `${o.kind} ${o.metadata.name} container ${c.name}`;
          const mount = (c.volumeMounts as K8s[] | undefined)?.find((m) => m.mountPath === '/tmp');
          expect(mount?.readOnly, `${where}: /tmp mounted writable`).not.toBe(true);
          const volume = (pod.volumes as K8s[] | undefined)?.find((v) => v.name === mount?.name);
          expect(volume?.emptyDir, `${where}: /tmp an emptyDir`).toBeDefined();
          const env = (c.env as K8s[] | undefined)?.find((e) => e.name === 'NODE_COMPILE_CACHE');
          expect(env, `${where}: NODE_COMPILE_CACHE left to the image`).toBeUndefined();
        }
      }
    });

    it('probes every long-running container and runs an entry file that exists', () => {
      for (const { o, pod } of workloads(objects()).filter((w) => w.o.kind !== 'Job')) {
        for (const c of pod.containers as K8s[]) {
          // Our parts start slowly (migrations, NATS) and so also get a startup probe.
          const ours = c.image?.includes('mcs');
          for (const p of ours
            ? ['startupProbe', 'readinessProbe', 'livenessProbe']
            : ['readinessProbe', 'livenessProbe'])
            expect(c[p], `${o.metadata.name} ${p}`).toBeDefined();
          // The services answer grpc.health.v1 (kit/health.ts): readiness asks it.
          if (o.metadata.labels?.['app.kubernetes.io/component'] === 'service')
            expect(c.readinessProbe.grpc?.port, `${o.metadata.name} readiness over gRPC health`).toBe(
              c.ports[0].containerPort,
            );
          if (ours) expect(existsSync(join(REPO_ROOT, c.args[0])), c.args[0]).toBe(true);
        }
      }
    });

    it("sets the gateway's RATE_LIMIT_REPLICAS to its usual replica count (the HPA's minimum)", () => {
      // Only while PostgreSQL cannot be reached does each gateway allow rate / RATE_LIMIT_REPLICAS:
      // fewer than the gateways running would let an account through at more than its rate.
      const gateway = objects().find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway')!;
      const hpa = objects().find(
        (o) => o.kind === 'HorizontalPodAutoscaler' && o.spec.scaleTargetRef.name === 'gateway',
      );
      const usual = hpa?.spec.minReplicas ?? gateway.spec.replicas;
      const env = (gateway.spec.template.spec.containers as K8s[])
        .find((c) => c.name === 'gateway')
        ?.env?.find((e: K8s) => e.name === 'RATE_LIMIT_REPLICAS');
      expect(Number(env?.value), 'RATE_LIMIT_REPLICAS').toBe(usual);
    });

    it('covers every Deployment and the NATS StatefulSet with a PodDisruptionBudget', () => {
      const pdbs = objects().filter((o) => o.kind === 'PodDisruptionBudget');
      // The local overlay's one-instance development PostgreSQL has nothing to keep available.
      const covered = workloads(objects()).filter(
        (w) => w.o.kind !== 'Job' && w.o.metadata.name !== 'postgres',
      );
      for (const { o, labels } of covered) {
        expect(
          pdbs.some((p) => matches(p.spec.selector, labels)),
          `${o.kind} ${o.metadata.name} has no PDB`,
        ).toBe(true);
      }
    });

    it('admits only the gateway from outside the namespace (NetworkPolicy)', () => {
      const policies = objects().filter((o) => o.kind === 'NetworkPolicy');
      const internal = policies.find((p) => p.metadata.name === 'internal-only');
      expect(internal?.spec.ingress).toEqual([{ from: [{ podSelector: {} }] }]);
      expect(internal?.spec.podSelector.matchExpressions[0]).toMatchObject({
        operator: 'NotIn',
        values: ['gateway'],
      });
    });

    it('exposes every part’s /metrics to Prometheus: annotations, a container port, a Service port, the NetworkPolicy', () => {
      const all = objects();
      const parts = workloads(all).filter(
        (w) => w.o.kind === 'Deployment' && w.pod.containers[0].image?.includes('mcs'),
      );
      expect(parts.map((w) => w.o.metadata.name).sort()).toEqual([
        'accounts',
        'commerce',
        'gateway',
        'messaging',
        'webhooks',
      ]);
      const scrape = all.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'metrics-scrape');
      expect(scrape, 'the metrics-scrape NetworkPolicy').toBeDefined();
      const allowed = (scrape!.spec.ingress as K8s[]).flatMap((r) => (r.ports as K8s[]).map((p) => p.port));
      const scraped = scrape!.spec.podSelector.matchExpressions[0].values as string[];
      const config = all.find((o) => o.kind === 'ConfigMap' && o.data?.ACCOUNTS_URL) as K8s;
      for (const { o, pod } of parts) {
        const name = o.metadata.name as string;
        const a = o.spec.template.metadata.annotations ?? {};
        expect(a['prometheus.io/scrape'], `${name} scrape annotation`).toBe('true');
        expect(a['prometheus.io/path'], name).toBe('/metrics');
        const port = Number(a['prometheus.io/port']);
        const c = pod.containers[0] as K8s;
        // The port that serves /metrics alone: the gateway's METRICS_PORT (gateway/src/env.ts), the
        // services' SERVICE_METRICS_PORT (kit/server.ts), so the scraper never reaches an RPC.
        const served =
          name === 'gateway'
            ? Number((c.env as K8s[]).find((e) => e.name === 'METRICS_PORT')?.value)
            : Number(config.data.SERVICE_METRICS_PORT);
        expect(port, `${name} annotated port is the one serving /metrics`).toBe(served);
        if (name !== 'gateway') {
          const rpc = Number(new URL(config.data[`${name.toUpperCase()}_URL`]).port);
          expect(port, `${name} metrics apart from its RPC port`).not.toBe(rpc);
          expect(allowed, `${name} RPC port closed to the monitoring namespace`).not.toContain(rpc);
        }
        const containerPort = (c.ports as K8s[]).find((p) => p.containerPort === port);
        expect(containerPort, `${name} declares its metrics port`).toBeDefined();
        const svc = all.find((x) => x.kind === 'Service' && x.metadata.name === name);
        const metricsPort = (svc?.spec.ports as K8s[] | undefined)?.find((p) => p.name === 'metrics');
        expect(metricsPort?.targetPort, `${name} Service port "metrics"`).toBe(containerPort!.name);
        expect(allowed, `${name} metrics port admitted from the monitoring namespace`).toContain(port);
        expect(scraped).toContain(name);
      }
    });

    it('runs the migrations in a Job before the parts, with the parts’ DATABASE_URL', () => {
      const job = objects().find((o) => o.kind === 'Job' && o.metadata.name === 'migrate');
      expect(job).toBeDefined();
      const c = job!.spec.template.spec.containers[0];
      expect(c.args).toEqual(['scripts/migrate.ts']);
      expect(existsSync(join(REPO_ROOT, 'scripts/migrate.ts'))).toBe(true);
      const gateway = objects().find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway')!;
      const gwEnv = (gateway.spec.template.spec.containers[0].env ?? []) as K8s[];
      const jobUrl = (c.env as K8s[]).find((e) => e.name === 'DATABASE_URL');
      const gwUrl = gwEnv.find((e) => e.name === 'DATABASE_URL');
      if (gwUrl) expect(jobUrl).toEqual(gwUrl);
      else expect(jobUrl?.valueFrom.secretKeyRef.name).toMatch(/^mcs-secrets/);
    });

    it('runs JetStream on three servers with the event stream replicated three times', () => {
      const nats = objects().find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'nats')!;
      expect(nats.spec.replicas).toBe(3);
      const config = objects().find(
        (o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('mcs-config'),
      )!;
      expect(config.data.NATS_STREAM_REPLICAS).toBe('3');
      const natsConf = objects().find(
        (o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('nats-config'),
      )!;
      const conf = Object.values(natsConf.data as Record<string, string>).join('\n');
      expect(conf).toMatch(/jetstream/);
      expect(conf).toMatch(/routes/);
    });

    it('points every ConfigMap and Secret reference at an object of the render', () => {
      const names = new Set(objects().map((o) => `${o.kind}/${o.metadata.name}`));
      for (const { o, pod } of workloads(objects())) {
        for (const c of pod.containers as K8s[]) {
          for (const from of (c.envFrom ?? []) as K8s[]) {
            if (from.configMapRef)
              expect(names, o.metadata.name).toContain(`ConfigMap/${from.configMapRef.name}`);
            if (from.secretRef) expect(names, o.metadata.name).toContain(`Secret/${from.secretRef.name}`);
          }
          for (const e of (c.env ?? []) as K8s[]) {
            const ref = e.valueFrom?.secretKeyRef?.name as string | undefined;
            // mcs-db-app is made by the CloudNativePG operator for the Cluster of this render.
            if (ref && ref !== 'mcs-db-app')
              expect(names, `${o.metadata.name} ${e.name}`).toContain(`Secret/${ref}`);
          }
        }
      }
    });

    it('autoscales the gateway (production) and gets PostgreSQL from CloudNativePG or an external URL', () => {
      const hpa = objects().find((o) => o.kind === 'HorizontalPodAutoscaler');
      const cluster = objects().find((o) => o.kind === 'Cluster');
      if (name === 'overlays-local') {
        expect(objects().some((o) => o.kind === 'StatefulSet' && o.metadata.name === 'postgres')).toBe(true);
        return;
      }
      expect(hpa?.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: 'gateway' });
      expect(hpa!.spec.maxReplicas).toBeGreaterThan(hpa!.spec.minReplicas);
      if (name === 'overlays-cnpg') {
        expect(cluster?.spec.instances).toBe(3);
        for (const { o, pod } of workloads(objects())) {
          if (o.metadata.name === 'nats') continue;
          const url = (pod.containers[0].env as K8s[]).find((e) => e.name === 'DATABASE_URL');
          expect(url?.valueFrom.secretKeyRef, o.metadata.name).toEqual({ name: 'mcs-db-app', key: 'uri' });
        }
      } else {
        expect(cluster).toBeUndefined();
        const secret = objects().find(
          (o) => o.kind === 'Secret' && o.metadata.name.startsWith('mcs-secrets'),
        )!;
        expect(Buffer.from(secret.data.DATABASE_URL.replace(/\s+/g, ''), 'base64').toString()).toMatch(
          /^postgres:\/\//,
        );
      }
    });
  },
);
