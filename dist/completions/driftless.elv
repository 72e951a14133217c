
use builtin;
use str;

set edit:completion:arg-completer[driftless] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'driftless'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'driftless'= {
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand validate 'Check a spec tree; print every error as file:line:col: message (exit 2 when invalid)'
            cand render 'Print the Kubernetes objects a spec tree renders to, as multi-document YAML'
            cand diff 'Show what apply would change: live vs desired, including what prune would delete (exit 0: no difference, 1: differences, 2: error)'
            cand apply 'Sync a spec tree once (apply, prune), then exit'
            cand run 'Run the daemon: keep the cluster in sync with a directory or a git repository'
            cand status 'Show the daemon''s status file as a table'
            cand schema 'Print the JSON Schema (Draft 7) of spec files, for editors'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand man 'Print the man page (roff) of driftless or of one subcommand'
        }
        &'driftless;validate'= {
            cand --allow-namespace 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;render'= {
            cand --allow-namespace 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable'
            cand --nodes 'Node names for `localservice` specs, instead of asking the cluster. Such nodes carry no labels, so only an empty node-selector matches them'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;diff'= {
            cand --allow-namespace 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable'
            cand --field-manager 'Field manager for server-side apply'
            cand --max-prune-ratio 'Refuse a revision that would prune more than this share of the inventory'
            cand --concurrency 'Objects applied (or dry-run) at once'
            cand --inventory-namespace 'Namespace of the inventory ConfigMaps'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand --force-conflicts 'Take fields that other field managers own instead of reporting a conflict'
            cand --adopt 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
            cand --no-prune 'Do not delete objects that left the specs'
            cand --allow-mass-prune 'Allow pruning everything, or more than --max-prune-ratio'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;apply'= {
            cand --allow-namespace 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable'
            cand --field-manager 'Field manager for server-side apply'
            cand --max-prune-ratio 'Refuse a revision that would prune more than this share of the inventory'
            cand --concurrency 'Objects applied (or dry-run) at once'
            cand --inventory-namespace 'Namespace of the inventory ConfigMaps'
            cand --timeout 'How long --wait waits, e.g. 90s, 5m'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand --force-conflicts 'Take fields that other field managers own instead of reporting a conflict'
            cand --adopt 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
            cand --no-prune 'Do not delete objects that left the specs'
            cand --allow-mass-prune 'Allow pruning everything, or more than --max-prune-ratio'
            cand --wait 'Wait until every spec is ready (or failed) before exiting'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;run'= {
            cand --dir 'Watch this directory of specs'
            cand --allow-namespace 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable'
            cand --git 'Sync from this git repository (credentials come from the environment, never argv)'
            cand --branch 'Branch to follow with --git (default: main)'
            cand --tag 'Tag to follow with --git'
            cand --commit 'Commit to pin with --git'
            cand --path 'Subdirectory of the repository that holds the specs'
            cand --interval 'How often to fetch with --git (POST /hooks/git fetches at once)'
            cand --resync 'Full resync (and directory rescan) period'
            cand --cache-dir 'Where to keep the git clone (default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless)'
            cand --status-file 'Where to write the status file (JSON, replaced atomically)'
            cand --metrics-addr 'Address for /metrics, /healthz, /readyz and /hooks/git'
            cand --hook-secret-file 'File holding the HMAC secret the git hook must sign with (X-Hub-Signature-256)'
            cand --lease-namespace 'Namespace of the leader-election Lease'
            cand --lease-name 'Name of the Lease (default: driftless-<instance>)'
            cand --ready-timeout 'A spec not ready this long after its revision was applied is reported failed'
            cand --sync-timeout 'A sync still running after this long is stopped, reported failed and retried with backoff (an apiserver that hangs, e.g. with its etcd away, would otherwise hold the daemon silent). Large first applies may need more'
            cand --field-manager 'Field manager for server-side apply'
            cand --max-prune-ratio 'Refuse a revision that would prune more than this share of the inventory'
            cand --concurrency 'Objects applied (or dry-run) at once'
            cand --inventory-namespace 'Namespace of the inventory ConfigMaps'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand --leader-elect 'Only the replica holding the Lease writes; the others keep caches warm'
            cand --events 'Record Kubernetes Events on the objects each sync changes, prunes or fails on'
            cand --force-conflicts 'Take fields that other field managers own instead of reporting a conflict'
            cand --adopt 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
            cand --no-prune 'Do not delete objects that left the specs'
            cand --allow-mass-prune 'Allow pruning everything, or more than --max-prune-ratio'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;status'= {
            cand --status-file 'The daemon''s status file'
            cand -o 'How to print it'
            cand --output 'How to print it'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;schema'= {
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;completions'= {
            cand --out-dir 'Instead, write the scripts of every shell into this directory'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'driftless;man'= {
            cand --out-dir 'Instead, write driftless.1 and a driftless-<subcommand>.1 for every visible subcommand into this directory'
            cand --kubeconfig 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)'
            cand --context 'The kubeconfig context to use (default: its current-context)'
            cand --log-format 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)'
            cand --instance 'Name of this driftless instance: instances sharing a cluster never touch each other''s objects'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
