/**
 * Every type a public signature of 'brokered-shell' names is itself exported from it, so
 * an embedder can write the type of what it gets back (a FoundTurn, a RestoreReport, a
 * Refusal) without reaching into dist/. Checked with the TypeScript compiler over
 * src/index.ts: each exported declaration's public parts (parameters, results,
 * properties, public class members, type arguments), written or inferred. A `typeof
 * schema` in a type (`z.infer<typeof x>`) names a value, not a type to import: left out.
 */
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/serve-process.js';

const SRC = path.join(REPO_ROOT, 'src');
const INDEX = path.join(SRC, 'index.ts');

function publicTypeLeaks(): { exported: number; missing: string[] } {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(REPO_ROOT, 'tsconfig.build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
  if (!config) throw new Error('tsconfig.build.json does not parse');
  const program = ts.createProgram([INDEX], { ...config.options, noEmit: true });
  const checker = program.getTypeChecker();
  const index = program.getSourceFile(INDEX);
  const moduleSymbol = index && checker.getSymbolAtLocation(index);
  if (!moduleSymbol) throw new Error('src/index.ts has no module symbol');
  const resolve = (symbol: ts.Symbol) => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);
  const exported = new Set(checker.getExportsOfModule(moduleSymbol).map(resolve));
  const ours = (symbol: ts.Symbol) => symbol.declarations?.some((d) => d.getSourceFile().fileName.startsWith(SRC)) === true;
  const missing = new Map<string, string>();
  const seenTypes = new Set<ts.Type>();

  const need = (symbol: ts.Symbol | undefined, where: string) => {
    if (!symbol) return;
    const target = resolve(symbol);
    // Type parameters, members and locals are not things to import.
    if (target.flags & (ts.SymbolFlags.TypeParameter | ts.SymbolFlags.Property | ts.SymbolFlags.Method | ts.SymbolFlags.EnumMember)) return;
    if (!ours(target) || exported.has(target)) return;
    const file = path.relative(REPO_ROOT, target.declarations?.[0]?.getSourceFile().fileName ?? '?');
    missing.set(`${target.getName()} (${file})`, where);
  };

  /** Named types an inferred type stands on: its alias or symbol, and their type arguments, one level of properties deep. */
  const needType = (type: ts.Type, where: string, depth = 0) => {
    if (seenTypes.has(type) || depth > 3) return;
    seenTypes.add(type);
    if (type.aliasSymbol) {
      need(type.aliasSymbol, where);
      for (const argument of type.aliasTypeArguments ?? []) needType(argument, where, depth + 1);
      return;
    }
    if (type.isUnion() || type.isIntersection()) {
      for (const part of type.types) needType(part, where, depth);
      return;
    }
    const symbol = type.getSymbol();
    if (symbol && symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class | ts.SymbolFlags.Enum)) {
      need(symbol, where);
      for (const argument of checker.getTypeArguments(type as ts.TypeReference) ?? []) needType(argument, where, depth + 1);
      return;
    }
    // An anonymous object type (an inferred result): what its properties are made of.
    if (symbol && symbol.flags & (ts.SymbolFlags.TypeLiteral | ts.SymbolFlags.ObjectLiteral)) {
      for (const property of type.getProperties()) {
        const declaration = property.valueDeclaration ?? property.declarations?.[0];
        if (declaration) needType(checker.getTypeOfSymbolAtLocation(property, declaration), where, depth + 1);
      }
    }
  };

  // `@internal` (a constructor behind a factory) is no part of the surface.
  const isHidden = (node: ts.Node) =>
    ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal') ||
    (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword || m.kind === ts.SyntaxKind.ProtectedKeyword)) ||
    ((ts.isPropertyDeclaration(node) || ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) && ts.isPrivateIdentifier(node.name));

  /** Type references written in a declaration's public parts (bodies and initialisers left out). */
  const visit = (node: ts.Node, where: string): void => {
    if (isHidden(node)) return;
    if (ts.isTypeReferenceNode(node)) need(checker.getSymbolAtLocation(ts.isQualifiedName(node.typeName) ? node.typeName.right : node.typeName), where);
    if (ts.isExpressionWithTypeArguments(node)) need(checker.getSymbolAtLocation(node.expression), where);
    if (ts.isFunctionLike(node) && !node.type) {
      const signature = checker.getSignatureFromDeclaration(node);
      if (signature) needType(checker.getReturnTypeOfSignature(signature), where);
    }
    if ((ts.isPropertyDeclaration(node) || ts.isVariableDeclaration(node)) && !node.type) {
      needType(checker.getTypeAtLocation(node.name), where);
    }
    ts.forEachChild(node, (child) => {
      const skipped = (ts.isFunctionLike(node) && child === (node as ts.FunctionLikeDeclaration).body) || ((ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node)) && child === node.initializer);
      if (!skipped) visit(child, where);
    });
  };

  for (const symbol of exported) {
    for (const declaration of symbol.declarations ?? []) {
      if (!declaration.getSourceFile().fileName.startsWith(SRC)) continue;
      visit(declaration, symbol.getName());
    }
  }
  return { exported: exported.size, missing: [...missing].map(([type, where]) => `${type}, named by ${where}`).sort() };
}

describe("the public types of 'brokered-shell'", () => {
  it('every type a public signature names is exported too', { timeout: 120_000 }, () => {
    const { exported, missing } = publicTypeLeaks();
    expect(exported).toBeGreaterThan(100);
    expect(missing).toEqual([]);
  });
});
