
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'driftless' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'driftless'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'driftless' {
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('validate', 'validate', [CompletionResultType]::ParameterValue, 'Check a spec tree; print every error as file:line:col: message (exit 2 when invalid)')
            [CompletionResult]::new('render', 'render', [CompletionResultType]::ParameterValue, 'Print the Kubernetes objects a spec tree renders to, as multi-document YAML')
            [CompletionResult]::new('diff', 'diff', [CompletionResultType]::ParameterValue, 'Show what apply would change: live vs desired, including what prune would delete (exit 0: no difference, 1: differences, 2: error)')
            [CompletionResult]::new('apply', 'apply', [CompletionResultType]::ParameterValue, 'Sync a spec tree once (apply, prune), then exit')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the daemon: keep the cluster in sync with a directory or a git repository')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show the daemon''s status file as a table')
            [CompletionResult]::new('reconcile', 'reconcile', [CompletionResultType]::ParameterValue, 'Ask a running daemon to fetch its source and sync now; wait for the result (exit 1 if the sync failed)')
            [CompletionResult]::new('suspend', 'suspend', [CompletionResultType]::ParameterValue, 'Stop a running daemon from applying, pruning or correcting one spec')
            [CompletionResult]::new('resume', 'resume', [CompletionResultType]::ParameterValue, 'Let a suspended spec sync again')
            [CompletionResult]::new('schema', 'schema', [CompletionResultType]::ParameterValue, 'Print the JSON Schema (Draft 7) of spec files, for editors')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish, elvish, powershell)')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page (roff) of driftless or of one subcommand')
            [CompletionResult]::new('reference', 'reference', [CompletionResultType]::ParameterValue, 'Write the book''s generated reference pages (spec kinds, CLI, metrics) into a directory')
            break
        }
        'driftless;validate' {
            [CompletionResult]::new('--allow-namespace', '--allow-namespace', [CompletionResultType]::ParameterName, 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable')
            [CompletionResult]::new('--sops-age-key-file', '--sops-age-key-file', [CompletionResultType]::ParameterName, 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops''s default ~/.config/sops/age/keys.txt when present')
            [CompletionResult]::new('--var', '--var', [CompletionResultType]::ParameterName, 'Set variable NAME for `${NAME}` in spec values, over the tree''s .driftless.toml [vars] and --vars-file. Repeatable')
            [CompletionResult]::new('--vars-file', '--vars-file', [CompletionResultType]::ParameterName, 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster''s own values), over the tree''s .driftless.toml [vars]. Read once, at start')
            [CompletionResult]::new('--kustomize', '--kustomize', [CompletionResultType]::ParameterName, 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`')
            [CompletionResult]::new('--helm', '--helm', [CompletionResultType]::ParameterName, 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH')
            [CompletionResult]::new('--render-timeout', '--render-timeout', [CompletionResultType]::ParameterName, 'How long one render may run before it (and what it started) is killed, e.g. 90s')
            [CompletionResult]::new('--render-concurrency', '--render-concurrency', [CompletionResultType]::ParameterName, 'Rendering tools run at once at most')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;render' {
            [CompletionResult]::new('--allow-namespace', '--allow-namespace', [CompletionResultType]::ParameterName, 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable')
            [CompletionResult]::new('--sops-age-key-file', '--sops-age-key-file', [CompletionResultType]::ParameterName, 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops''s default ~/.config/sops/age/keys.txt when present')
            [CompletionResult]::new('--var', '--var', [CompletionResultType]::ParameterName, 'Set variable NAME for `${NAME}` in spec values, over the tree''s .driftless.toml [vars] and --vars-file. Repeatable')
            [CompletionResult]::new('--vars-file', '--vars-file', [CompletionResultType]::ParameterName, 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster''s own values), over the tree''s .driftless.toml [vars]. Read once, at start')
            [CompletionResult]::new('--kustomize', '--kustomize', [CompletionResultType]::ParameterName, 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`')
            [CompletionResult]::new('--helm', '--helm', [CompletionResultType]::ParameterName, 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH')
            [CompletionResult]::new('--render-timeout', '--render-timeout', [CompletionResultType]::ParameterName, 'How long one render may run before it (and what it started) is killed, e.g. 90s')
            [CompletionResult]::new('--render-concurrency', '--render-concurrency', [CompletionResultType]::ParameterName, 'Rendering tools run at once at most')
            [CompletionResult]::new('--nodes', '--nodes', [CompletionResultType]::ParameterName, 'Node names for `localservice` specs, instead of asking the cluster. Such nodes carry no labels, so only an empty node-selector matches them')
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Write the tree to DIR instead, every Kustomize directory and Jsonnet file replaced by its output as plain YAML (the rendered-manifests pattern: CI commits DIR, and driftless applies it with no tool)')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;diff' {
            [CompletionResult]::new('--allow-namespace', '--allow-namespace', [CompletionResultType]::ParameterName, 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable')
            [CompletionResult]::new('--sops-age-key-file', '--sops-age-key-file', [CompletionResultType]::ParameterName, 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops''s default ~/.config/sops/age/keys.txt when present')
            [CompletionResult]::new('--var', '--var', [CompletionResultType]::ParameterName, 'Set variable NAME for `${NAME}` in spec values, over the tree''s .driftless.toml [vars] and --vars-file. Repeatable')
            [CompletionResult]::new('--vars-file', '--vars-file', [CompletionResultType]::ParameterName, 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster''s own values), over the tree''s .driftless.toml [vars]. Read once, at start')
            [CompletionResult]::new('--kustomize', '--kustomize', [CompletionResultType]::ParameterName, 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`')
            [CompletionResult]::new('--helm', '--helm', [CompletionResultType]::ParameterName, 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH')
            [CompletionResult]::new('--render-timeout', '--render-timeout', [CompletionResultType]::ParameterName, 'How long one render may run before it (and what it started) is killed, e.g. 90s')
            [CompletionResult]::new('--render-concurrency', '--render-concurrency', [CompletionResultType]::ParameterName, 'Rendering tools run at once at most')
            [CompletionResult]::new('--field-manager', '--field-manager', [CompletionResultType]::ParameterName, 'Field manager for server-side apply')
            [CompletionResult]::new('--max-prune-ratio', '--max-prune-ratio', [CompletionResultType]::ParameterName, 'Refuse a revision that would prune more than this share of the inventory')
            [CompletionResult]::new('--concurrency', '--concurrency', [CompletionResultType]::ParameterName, 'Objects applied (or dry-run) at once')
            [CompletionResult]::new('--inventory-namespace', '--inventory-namespace', [CompletionResultType]::ParameterName, 'Namespace of the inventory ConfigMaps')
            [CompletionResult]::new('--replace-on-immutable', '--replace-on-immutable', [CompletionResultType]::ParameterName, 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'How to print the diff: text (unified diffs, coloured at a terminal), markdown (a pull-request comment: a summary table and a collapsed diff per object, at most 60,000 characters), json (one document: a summary and an entry per object)')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'How to print the diff: text (unified diffs, coloured at a terminal), markdown (a pull-request comment: a summary table and a collapsed diff per object, at most 60,000 characters), json (one document: a summary and an entry per object)')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('--force-conflicts', '--force-conflicts', [CompletionResultType]::ParameterName, 'Take fields that other field managers own instead of reporting a conflict')
            [CompletionResult]::new('--adopt', '--adopt', [CompletionResultType]::ParameterName, 'Take over existing objects driftless did not create (per spec: `adopt = true`)')
            [CompletionResult]::new('--no-prune', '--no-prune', [CompletionResultType]::ParameterName, 'Do not delete objects that left the specs')
            [CompletionResult]::new('--allow-mass-prune', '--allow-mass-prune', [CompletionResultType]::ParameterName, 'Allow pruning everything, or more than --max-prune-ratio')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;apply' {
            [CompletionResult]::new('--allow-namespace', '--allow-namespace', [CompletionResultType]::ParameterName, 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable')
            [CompletionResult]::new('--sops-age-key-file', '--sops-age-key-file', [CompletionResultType]::ParameterName, 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops''s default ~/.config/sops/age/keys.txt when present')
            [CompletionResult]::new('--var', '--var', [CompletionResultType]::ParameterName, 'Set variable NAME for `${NAME}` in spec values, over the tree''s .driftless.toml [vars] and --vars-file. Repeatable')
            [CompletionResult]::new('--vars-file', '--vars-file', [CompletionResultType]::ParameterName, 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster''s own values), over the tree''s .driftless.toml [vars]. Read once, at start')
            [CompletionResult]::new('--kustomize', '--kustomize', [CompletionResultType]::ParameterName, 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`')
            [CompletionResult]::new('--helm', '--helm', [CompletionResultType]::ParameterName, 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH')
            [CompletionResult]::new('--render-timeout', '--render-timeout', [CompletionResultType]::ParameterName, 'How long one render may run before it (and what it started) is killed, e.g. 90s')
            [CompletionResult]::new('--render-concurrency', '--render-concurrency', [CompletionResultType]::ParameterName, 'Rendering tools run at once at most')
            [CompletionResult]::new('--field-manager', '--field-manager', [CompletionResultType]::ParameterName, 'Field manager for server-side apply')
            [CompletionResult]::new('--max-prune-ratio', '--max-prune-ratio', [CompletionResultType]::ParameterName, 'Refuse a revision that would prune more than this share of the inventory')
            [CompletionResult]::new('--concurrency', '--concurrency', [CompletionResultType]::ParameterName, 'Objects applied (or dry-run) at once')
            [CompletionResult]::new('--inventory-namespace', '--inventory-namespace', [CompletionResultType]::ParameterName, 'Namespace of the inventory ConfigMaps')
            [CompletionResult]::new('--replace-on-immutable', '--replace-on-immutable', [CompletionResultType]::ParameterName, 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long --wait waits, e.g. 90s, 5m')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('--force-conflicts', '--force-conflicts', [CompletionResultType]::ParameterName, 'Take fields that other field managers own instead of reporting a conflict')
            [CompletionResult]::new('--adopt', '--adopt', [CompletionResultType]::ParameterName, 'Take over existing objects driftless did not create (per spec: `adopt = true`)')
            [CompletionResult]::new('--no-prune', '--no-prune', [CompletionResultType]::ParameterName, 'Do not delete objects that left the specs')
            [CompletionResult]::new('--allow-mass-prune', '--allow-mass-prune', [CompletionResultType]::ParameterName, 'Allow pruning everything, or more than --max-prune-ratio')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait until every spec is ready (or failed) before exiting')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;run' {
            [CompletionResult]::new('--dir', '--dir', [CompletionResultType]::ParameterName, 'Watch this directory of specs')
            [CompletionResult]::new('--allow-namespace', '--allow-namespace', [CompletionResultType]::ParameterName, 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable')
            [CompletionResult]::new('--sops-age-key-file', '--sops-age-key-file', [CompletionResultType]::ParameterName, 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops''s default ~/.config/sops/age/keys.txt when present')
            [CompletionResult]::new('--var', '--var', [CompletionResultType]::ParameterName, 'Set variable NAME for `${NAME}` in spec values, over the tree''s .driftless.toml [vars] and --vars-file. Repeatable')
            [CompletionResult]::new('--vars-file', '--vars-file', [CompletionResultType]::ParameterName, 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster''s own values), over the tree''s .driftless.toml [vars]. Read once, at start')
            [CompletionResult]::new('--kustomize', '--kustomize', [CompletionResultType]::ParameterName, 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`')
            [CompletionResult]::new('--helm', '--helm', [CompletionResultType]::ParameterName, 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH')
            [CompletionResult]::new('--render-timeout', '--render-timeout', [CompletionResultType]::ParameterName, 'How long one render may run before it (and what it started) is killed, e.g. 90s')
            [CompletionResult]::new('--render-concurrency', '--render-concurrency', [CompletionResultType]::ParameterName, 'Rendering tools run at once at most')
            [CompletionResult]::new('--git', '--git', [CompletionResultType]::ParameterName, 'Sync from this git repository (credentials come from the environment, never argv)')
            [CompletionResult]::new('--branch', '--branch', [CompletionResultType]::ParameterName, 'Branch to follow with --git (default: main)')
            [CompletionResult]::new('--tag', '--tag', [CompletionResultType]::ParameterName, 'Tag to follow with --git')
            [CompletionResult]::new('--commit', '--commit', [CompletionResultType]::ParameterName, 'Commit to pin with --git')
            [CompletionResult]::new('--path', '--path', [CompletionResultType]::ParameterName, 'Subdirectory of the repository that holds the specs')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'How often to fetch with --git (POST /hooks/git fetches at once)')
            [CompletionResult]::new('--resync', '--resync', [CompletionResultType]::ParameterName, 'Full resync (and directory rescan) period')
            [CompletionResult]::new('--cache-dir', '--cache-dir', [CompletionResultType]::ParameterName, 'Where to keep the git clone (default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless)')
            [CompletionResult]::new('--status-file', '--status-file', [CompletionResultType]::ParameterName, 'Where to write the status file (JSON, replaced atomically) [default: $STATE_DIRECTORY/status.json under systemd, else ${XDG_STATE_HOME:-~/.local/state}/driftless/status.json; `status-<instance>.json` for an instance other than `default`]. `driftless status` reads the same')
            [CompletionResult]::new('--metrics-addr', '--metrics-addr', [CompletionResultType]::ParameterName, 'Address for /metrics, /healthz, /readyz and /hooks/git (a host name such as `localhost:0` is resolved; its first address is used)')
            [CompletionResult]::new('--hook-secret-file', '--hook-secret-file', [CompletionResultType]::ParameterName, 'File holding the HMAC secret the git hook must sign with (X-Hub-Signature-256)')
            [CompletionResult]::new('--lease-namespace', '--lease-namespace', [CompletionResultType]::ParameterName, 'Namespace of the leader-election Lease')
            [CompletionResult]::new('--lease-name', '--lease-name', [CompletionResultType]::ParameterName, 'Name of the Lease (default: driftless-<instance>)')
            [CompletionResult]::new('--ready-timeout', '--ready-timeout', [CompletionResultType]::ParameterName, 'A spec not ready this long after its revision was applied is reported failed')
            [CompletionResult]::new('--sync-timeout', '--sync-timeout', [CompletionResultType]::ParameterName, 'A whole sync (applies, wave and hook waits, prune) still running after this long stops at its next safe point, is reported failed and retried with backoff; every wait within it is bounded by what is left. Large first applies may need more')
            [CompletionResult]::new('--api-token-file', '--api-token-file', [CompletionResultType]::ParameterName, 'File holding the bearer token the API''s controls need (POST /api/v1/sync, suspend, resume); without it they are refused')
            [CompletionResult]::new('--drift', '--drift', [CompletionResultType]::ParameterName, 'What to do when someone else changes an owned field: take it back, or only report it (status `drifted`, metric driftless_drifted_objects)')
            [CompletionResult]::new('--notify', '--notify', [CompletionResultType]::ParameterName, 'POST each transition as JSON to this URL (repeatable): revision applied and ready, revision invalid, sync failed, prune refused, specs not ready in time, recovered')
            [CompletionResult]::new('--notify-secret-file', '--notify-secret-file', [CompletionResultType]::ParameterName, 'File holding the secret that signs --notify requests (X-Driftless-Signature: sha256=<HMAC-SHA256 of the body>)')
            [CompletionResult]::new('--notify-slack', '--notify-slack', [CompletionResultType]::ParameterName, 'Post the same transitions to a Slack-compatible incoming webhook (repeatable). The URL is a credential: prefer the environment variable to argv')
            [CompletionResult]::new('--commit-status', '--commit-status', [CompletionResultType]::ParameterName, 'Set a commit status on each git revision: pending when its sync starts, success when applied and every spec ready, failure otherwise. Token from DRIFTLESS_COMMIT_STATUS_TOKEN or DRIFTLESS_COMMIT_STATUS_TOKEN_FILE')
            [CompletionResult]::new('--commit-status-url', '--commit-status-url', [CompletionResultType]::ParameterName, 'The provider''s API base URL (default: https://api.github.com, https://gitlab.com/api/v4)')
            [CompletionResult]::new('--commit-status-repo', '--commit-status-repo', [CompletionResultType]::ParameterName, 'The repository: GitHub owner/name, GitLab project path (default: from --git)')
            [CompletionResult]::new('--field-manager', '--field-manager', [CompletionResultType]::ParameterName, 'Field manager for server-side apply')
            [CompletionResult]::new('--max-prune-ratio', '--max-prune-ratio', [CompletionResultType]::ParameterName, 'Refuse a revision that would prune more than this share of the inventory')
            [CompletionResult]::new('--concurrency', '--concurrency', [CompletionResultType]::ParameterName, 'Objects applied (or dry-run) at once')
            [CompletionResult]::new('--inventory-namespace', '--inventory-namespace', [CompletionResultType]::ParameterName, 'Namespace of the inventory ConfigMaps')
            [CompletionResult]::new('--replace-on-immutable', '--replace-on-immutable', [CompletionResultType]::ParameterName, 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('--leader-elect', '--leader-elect', [CompletionResultType]::ParameterName, 'Only the replica holding the Lease writes; the others keep caches warm')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Record Kubernetes Events on the objects each sync changes, prunes or fails on')
            [CompletionResult]::new('--force-conflicts', '--force-conflicts', [CompletionResultType]::ParameterName, 'Take fields that other field managers own instead of reporting a conflict')
            [CompletionResult]::new('--adopt', '--adopt', [CompletionResultType]::ParameterName, 'Take over existing objects driftless did not create (per spec: `adopt = true`)')
            [CompletionResult]::new('--no-prune', '--no-prune', [CompletionResultType]::ParameterName, 'Do not delete objects that left the specs')
            [CompletionResult]::new('--allow-mass-prune', '--allow-mass-prune', [CompletionResultType]::ParameterName, 'Allow pruning everything, or more than --max-prune-ratio')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;status' {
            [CompletionResult]::new('--status-file', '--status-file', [CompletionResultType]::ParameterName, 'The daemon''s status file [default: as `run` writes it, see `run --status-file`]')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'How to print it')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'How to print it')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;reconcile' {
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The daemon''s HTTP address (its --metrics-addr), `http://` assumed without a scheme')
            [CompletionResult]::new('--token-file', '--token-file', [CompletionResultType]::ParameterName, 'File holding the API token (the daemon''s --api-token-file); or set DRIFTLESS_API_TOKEN')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for the sync to end')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;suspend' {
            [CompletionResult]::new('--reason', '--reason', [CompletionResultType]::ParameterName, 'Why; shown in the API, the status file, `driftless status` and the web UI')
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The daemon''s HTTP address (its --metrics-addr), `http://` assumed without a scheme')
            [CompletionResult]::new('--token-file', '--token-file', [CompletionResultType]::ParameterName, 'File holding the API token (the daemon''s --api-token-file); or set DRIFTLESS_API_TOKEN')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;resume' {
            [CompletionResult]::new('--server', '--server', [CompletionResultType]::ParameterName, 'The daemon''s HTTP address (its --metrics-addr), `http://` assumed without a scheme')
            [CompletionResult]::new('--token-file', '--token-file', [CompletionResultType]::ParameterName, 'File holding the API token (the daemon''s --api-token-file); or set DRIFTLESS_API_TOKEN')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;schema' {
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;completions' {
            [CompletionResult]::new('--out-dir', '--out-dir', [CompletionResultType]::ParameterName, 'Instead, write the scripts of every shell into this directory')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;man' {
            [CompletionResult]::new('--out-dir', '--out-dir', [CompletionResultType]::ParameterName, 'Instead, write driftless.1 and a driftless-<subcommand>.1 for every visible subcommand into this directory')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'driftless;reference' {
            [CompletionResult]::new('--out-dir', '--out-dir', [CompletionResultType]::ParameterName, 'Write the pages (spec-file.md, one page per kind, cli.md, metrics.md) into this directory')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'The kubeconfig context to use (default: its current-context)')
            [CompletionResult]::new('--kube-api-qps', '--kube-api-qps', [CompletionResultType]::ParameterName, 'Requests per second to the apiserver at most, client-side, as client-go''s rate limit (0: no limit). Answers 429 and 502-504 are retried either way')
            [CompletionResult]::new('--kube-api-burst', '--kube-api-burst', [CompletionResultType]::ParameterName, 'Requests that may go out at once above --kube-api-qps before it paces them')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)')
            [CompletionResult]::new('--instance', '--instance', [CompletionResultType]::ParameterName, 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
