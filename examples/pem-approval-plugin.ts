/**
 * An organisation's own policy, added without touching brokered-shell's core:
 * writing or deleting a private key (`*.pem`, `*.key`) needs a person's approval.
 *
 * Register it next to the standard set:
 *   broker.use(...standardPlugins(options), new PemApprovalPlugin());
 */
import {
  PolicyStage,
  combineDecisions,
  evaluateFileSafety,
  type Broker,
  type BrokerPlugin,
  type Decision,
  type FileSafetyPlugin,
} from 'brokered-shell';

export class PemApprovalPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'example-pem-approval';
  readonly name = PemApprovalPlugin.PLUGIN_NAME;
  readonly #suffixes: readonly string[];

  constructor(suffixes: readonly string[] = ['.pem', '.key']) {
    this.#suffixes = suffixes;
  }

  apply(broker: Broker): void {
    // On evaluate-policy the first opinion wins, and ORGANISATION comes before the
    // configured rules. So that asking for approval never loosens what the standard
    // policy would refuse (a key outside the workspace), combine with its verdict.
    broker.hooks.evaluatePolicy.tap({ name: this.name, stage: PolicyStage.ORGANISATION }, (target, resolved) => {
      if (target.access === 'read') return undefined;
      if (![target.lexical, target.resolved].some((name) => this.#suffixes.some((suffix) => name.endsWith(suffix)))) return undefined;
      const mine: Decision = { verdict: 'prompt', reason: 'private keys change only with approval', source: this.name };
      const standard = broker.plugin<FileSafetyPlugin>('file-safety');
      return standard ? combineDecisions([mine, evaluateFileSafety(target, standard.policy, resolved.request)]) : mine;
    });
  }
}
