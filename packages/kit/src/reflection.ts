// gRPC server reflection, v1 and v1alpha (the two versions grpcurl, `buf curl`, Postman and
// grpcui ask for), so a caller can list and call every service of a port without its proto
// files. The descriptors come from the generated code (protobuf-es keeps each file's
// FileDescriptorProto), so they are exactly what the server runs.
import { create, type DescFile, toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectRouter } from '@connectrpc/connect';
import { grpcReflection, grpcReflectionAlpha } from '@mcs/proto';

/** Every file `roots` need, themselves included, each once. */
function closure(roots: DescFile[]): Map<string, DescFile> {
  const files = new Map<string, DescFile>();
  const visit = (f: DescFile) => {
    if (files.has(f.proto.name)) return;
    files.set(f.proto.name, f);
    for (const dep of f.dependencies) visit(dep);
  };
  for (const f of roots) visit(f);
  return files;
}

/** Fully-qualified names of everything a file declares (messages, enums, services, methods, extensions). */
function symbolsOf(file: DescFile, into: Map<string, DescFile>): void {
  const pkg = file.proto.package;
  const add = (name: string) => into.set(pkg ? `${pkg}.${name}` : name, file);
  const visitMessage = (prefix: string, m: DescFile['proto']['messageType'][number]) => {
    const name = prefix ? `${prefix}.${m.name}` : m.name;
    add(name);
    for (const f of m.field) add(`${name}.${f.name}`);
    for (const o of m.oneofDecl) add(`${name}.${o.name}`);
    for (const e of m.enumType) add(`${name}.${e.name}`);
    for (const x of m.extension) add(`${name}.${x.name}`);
    for (const n of m.nestedType) visitMessage(name, n);
  };
  for (const m of file.proto.messageType) visitMessage('', m);
  for (const e of file.proto.enumType) {
    add(e.name);
    for (const v of e.value) add(v.name); // enum values are siblings of their enum
  }
  for (const x of file.proto.extension) add(x.name);
  for (const s of file.proto.service) {
    add(s.name);
    for (const m of s.method) add(`${s.name}.${m.name}`);
  }
}

/**
 * Adds grpc.reflection.v1 and v1alpha ServerReflection to `router`, describing `files` (the
 * files of the served services, the health and reflection files) and what they import.
 */
export function addReflectionService(router: ConnectRouter, serviceNames: string[], roots: DescFile[]): void {
  const files = closure([
    ...roots,
    grpcReflection.file_grpc_reflection_v1_reflection,
    grpcReflectionAlpha.file_grpc_reflection_v1alpha_reflection,
  ]);
  const symbols = new Map<string, DescFile>();
  for (const f of files.values()) symbolsOf(f, symbols);
  const bytes = new Map<string, Uint8Array>();
  const serialized = (f: DescFile) => {
    let b = bytes.get(f.proto.name);
    if (!b) {
      b = toBinary(FileDescriptorProtoSchema, f.proto);
      bytes.set(f.proto.name, b);
    }
    return b;
  };
  // Extensions by the message they extend (`all_extension_numbers_of_type`, `file_containing_extension`).
  const extensions = new Map<string, Map<number, DescFile>>();
  for (const f of files.values()) {
    for (const ext of f.extensions) {
      const byNumber = extensions.get(ext.extendee.typeName) ?? new Map<number, DescFile>();
      byNumber.set(ext.number, f);
      extensions.set(ext.extendee.typeName, byNumber);
    }
  }
  const listed = [
    ...new Set([
      ...serviceNames,
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]),
  ].sort();

  type Request = grpcReflection.ServerReflectionRequest | grpcReflectionAlpha.ServerReflectionRequest;
  /** One answer as plain data: the init shape of both versions' oneof. */
  type Answer =
    | { case: 'fileDescriptorResponse'; value: { fileDescriptorProto: Uint8Array[] } }
    | { case: 'listServicesResponse'; value: { service: Array<{ name: string }> } }
    | { case: 'allExtensionNumbersResponse'; value: { baseTypeName: string; extensionNumber: number[] } }
    | { case: 'errorResponse'; value: { errorCode: number; errorMessage: string } };

  /** A file and everything it imports, the file first (what grpc-go and grpc-java send). */
  const withDeps = (f: DescFile): Answer => ({
    case: 'fileDescriptorResponse',
    value: { fileDescriptorProto: [...closure([f]).values()].map(serialized) },
  });
  const notFound = (what: string): Answer => ({
    case: 'errorResponse',
    value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
  });

  function respond(req: Request): Answer {
    const r = req.messageRequest;
    switch (r.case) {
      case 'listServices':
        return {
          case: 'listServicesResponse',
          value: { service: listed.map((name) => ({ name })) },
        };
      case 'fileByFilename': {
        const f = files.get(r.value);
        return f ? withDeps(f) : notFound(`file ${r.value}`);
      }
      case 'fileContainingSymbol': {
        const f = symbols.get(r.value.replace(/^\./, ''));
        return f ? withDeps(f) : notFound(`symbol ${r.value}`);
      }
      case 'fileContainingExtension': {
        const f = extensions.get(r.value.containingType)?.get(r.value.extensionNumber);
        return f
          ? withDeps(f)
          : notFound(`extension ${r.value.extensionNumber} of ${r.value.containingType}`);
      }
      case 'allExtensionNumbersOfType': {
        if (!symbols.has(r.value)) return notFound(`type ${r.value}`);
        return {
          case: 'allExtensionNumbersResponse',
          value: {
            baseTypeName: r.value,
            extensionNumber: [...(extensions.get(r.value)?.keys() ?? [])].sort((a, b) => a - b),
          },
        };
      }
      case undefined:
        return {
          case: 'errorResponse',
          value: { errorCode: Code.InvalidArgument, errorMessage: 'empty request' },
        };
      default: {
        const never: never = r;
        throw new Error(`unknown reflection request ${JSON.stringify(never)}`);
      }
    }
  }

  router.service(grpcReflection.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        yield create(grpcReflection.ServerReflectionResponseSchema, {
          validHost: req.host,
          originalRequest: req,
          messageResponse: respond(req),
        });
      }
    },
  });
  router.service(grpcReflectionAlpha.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        yield create(grpcReflectionAlpha.ServerReflectionResponseSchema, {
          validHost: req.host,
          originalRequest: req,
          messageResponse: respond(req),
        });
      }
    },
  });
}
