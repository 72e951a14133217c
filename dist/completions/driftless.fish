# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_driftless_global_optspecs
    string join \n kubeconfig= context= kube-api-qps= kube-api-burst= log-format= instance= h/help V/version
end

function __fish_driftless_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_driftless_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_driftless_using_subcommand
    set -l cmd (__fish_driftless_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c driftless -n "__fish_driftless_needs_command" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_needs_command" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_needs_command" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_needs_command" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_needs_command" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_needs_command" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_needs_command" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_needs_command" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "validate" -d 'Check a spec tree; print every error as file:line:col: message (exit 2 when invalid)'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "render" -d 'Print the Kubernetes objects a spec tree renders to, as multi-document YAML'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "diff" -d 'Show what apply would change: live vs desired, including what prune would delete (exit 0: no difference, 1: differences, 2: error)'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "apply" -d 'Sync a spec tree once (apply, prune), then exit'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "run" -d 'Run the daemon: keep the cluster in sync with a directory, a git repository or an OCI artifact'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "push" -d 'Publish a spec tree as an OCI artifact, laid out as `flux push artifact` does (reproducible: the same tree gives the same digest)'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "status" -d 'Show the daemon\'s status file as a table'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "reconcile" -d 'Ask a running daemon to fetch its source and sync now; wait for the result (exit 1 if the sync failed)'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "suspend" -d 'Stop a running daemon from applying, pruning or correcting one spec'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "resume" -d 'Let a suspended spec sync again'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "login" -d 'Sign in with the daemon\'s OpenID Connect provider in a browser; the controls then act as you'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "schema" -d 'Print the JSON Schema (Draft 7) of spec files, for editors'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "man" -d 'Print the man page (roff) of driftless or of one subcommand'
complete -c driftless -n "__fish_driftless_needs_command" -f -a "reference" -d 'Write the book\'s generated reference pages (spec kinds, CLI, metrics) into a directory'
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand validate" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand validate" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand validate" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand render" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l nodes -d 'Node names for `localservice` specs, instead of asking the cluster. Such nodes carry no labels, so only an empty node-selector matches them' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l out -d 'Write the tree to DIR instead, every Kustomize directory, Jsonnet file, chart release and Flux or Argo CD app replaced by its output as plain YAML, an app\'s in DIR/argo/NAME.yaml or DIR/flux/NS/NAME.yaml (the rendered-manifests pattern: CI commits DIR, and driftless applies it with no tool)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand render" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand render" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand render" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand render" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand render" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand render" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l field-manager -d 'Field manager for server-side apply' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l max-prune-ratio -d 'Refuse a revision that would prune more than this share of the inventory' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l concurrency -d 'Objects applied (or dry-run) at once' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l inventory-namespace -d 'Namespace of the inventory ConfigMaps' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l replace-on-immutable -d 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -s o -l output -d 'How to print the diff: text (unified diffs, coloured at a terminal), markdown (a pull-request comment: a summary table and a collapsed diff per object, at most 60,000 characters), json (one document: a summary and an entry per object)' -r -f -a "text\t''
markdown\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l base -d 'Preview a change with no cluster: render the tree as commit REV has it and as the work tree has it (or --head), and show what applying the change over REV creates, updates and prunes, per app. Needs no kubeconfig' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l head -d 'With --base: the change is commit REV, not the work tree' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l nodes -d 'With --base: node names for `localservice` specs (there is no cluster to list them)' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l force-conflicts -d 'Take fields that other field managers own instead of reporting a conflict'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l adopt -d 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l no-prune -d 'Do not delete objects that left the specs'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -l allow-mass-prune -d 'Allow pruning everything, or more than --max-prune-ratio'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand diff" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l field-manager -d 'Field manager for server-side apply' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l max-prune-ratio -d 'Refuse a revision that would prune more than this share of the inventory' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l concurrency -d 'Objects applied (or dry-run) at once' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l inventory-namespace -d 'Namespace of the inventory ConfigMaps' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l replace-on-immutable -d 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l timeout -d 'How long --wait waits, e.g. 90s, 5m' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l force-conflicts -d 'Take fields that other field managers own instead of reporting a conflict'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l adopt -d 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l no-prune -d 'Do not delete objects that left the specs'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l allow-mass-prune -d 'Allow pruning everything, or more than --max-prune-ratio'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -l wait -d 'Wait until every spec is ready (or failed) before exiting'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand apply" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l dir -d 'Watch this directory of specs' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l git -d 'Sync from this git repository (credentials come from the environment, never argv)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l branch -d 'Branch to follow with --git (default: main)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l tag -d 'Tag to follow with --git or --oci (--oci\'s default: latest)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oci -d 'Sync from this OCI artifact, oci://HOST/REPO (as `flux push artifact` or `driftless push` publish it); registry flags as for every command' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l semver -d 'Follow the newest tag of --oci within this semver range, e.g. ">=1.0.0 <2.0.0"' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l digest -d 'Pin --oci to this digest (sha256:…): it never moves' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l commit -d 'Commit to pin with --git' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l verify-commits -d 'Apply only revisions signed by a key this file trusts: an allowed_signers file (ssh-keygen\'s format, as git\'s gpg.ssh.allowedSignersFile) for SSH signatures, or an OpenPGP keyring (public keys as gpg exports them, armored or not) for OpenPGP ones; repeat it for both. The commit\'s signature is checked, or with --tag the tag\'s. Any other revision is not applied and the last verified one stays (read again at each fetch)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l path -d 'Subdirectory of the repository (--git) or of the artifact\'s tree (--oci) that holds the specs' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l interval -d 'How often to fetch with --git or --oci (POST /hooks/git or /hooks/oci fetches at once)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l resync -d 'Full resync (and directory rescan) period, counted from the end of the last whole sync' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l status-file -d 'Where to write the status file (JSON, replaced atomically) [default: $STATE_DIRECTORY/status.json under systemd, else ${XDG_STATE_HOME:-~/.local/state}/driftless/status.json; `status-<instance>.json` for an instance other than `default`]. `driftless status` reads the same' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l metrics-addr -d 'Address for /metrics, /healthz, /readyz and /hooks/git (a host name such as `localhost:0` is resolved; its first address is used)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l tls-cert-file -d 'Serve that address over TLS (1.2 and 1.3) with this certificate (PEM; the server\'s own first, then its chain). Read again when it changes on disk' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l tls-key-file -d 'The certificate\'s private key (PEM: PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l tls-client-ca-file -d 'Let machine callers present a client certificate this CA (PEM, one or more) signed for client authentication: the controls then accept it as they accept the API token, and the audit line names its subject\'s common name. Clients without one are served as before. Read at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l hook-secret-file -d 'File holding the HMAC secret the git hook must sign with (X-Hub-Signature-256)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l lease-namespace -d 'Namespace of the leader-election Lease' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l lease-name -d 'Name of the Lease (default: driftless-<instance>)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l shard-identity -d 'This replica\'s name among those sharing the tree: unique, and the same after a restart [default: $POD_NAME, else $HOSTNAME]' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l shard-lease -d 'A member whose Lease has not been renewed this long is dead: the others take its specs over. It stops writing a third of this earlier' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l ready-timeout -d 'A spec not ready this long after its revision was applied is reported failed' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l sync-timeout -d 'A sync (applies, wave and hook waits, prune) that goes this long without moving (no object applied or pruned, no stage ready) stops at its next safe point, is reported failed and retried with backoff; every wait within it is bounded by what is left. A large first apply that keeps applying is never cut short' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l api-token-file -d 'File holding the bearer token the API\'s controls need (POST /api/v1/sync, suspend, resume); without it they are refused' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l drift -d 'What to do when someone else changes an owned field: take it back, or only report it (status `drifted`, metric driftless_drifted_objects)' -r -f -a "correct\t''
report\t''"
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-issuer -d 'Let people sign in to the UI and API with this OpenID Connect provider (its issuer URL); what each sees and steers is what the cluster\'s RBAC lets their user and groups get and patch. Reads then need an identity (a person, the API token or a client certificate). Needs --external-url' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-client-id -d 'The client driftless is registered as with the provider; ID tokens must be for it' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-client-secret-file -d 'File holding the client\'s secret (a confidential client); without it, a public client (PKCE alone)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-scope -d 'Scopes asked for at sign-in besides openid (repeatable)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-ca-file -d 'Trust the provider\'s certificate when this CA (PEM) signed it, or it is that self-signed certificate, besides the system\'s CAs' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-username-claim -d 'The ID token\'s claim that is the user\'s name for RBAC, as kube-apiserver\'s --oidc-username-claim' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-username-prefix -d 'Put before every user name (as kube-apiserver\'s --oidc-username-prefix)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-groups-claim -d 'The ID token\'s claim listing the user\'s groups' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-groups-prefix -d 'Put before every group name (as kube-apiserver\'s --oidc-groups-prefix)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l oidc-clock-skew -d 'How far the provider\'s clock may be from this machine\'s' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l session-duration -d 'How long a sign-in lasts' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l external-url -d 'The address people reach the listener at (https://, or http:// on loopback), the provider sending them back to its /auth/callback' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l notify -d 'POST each transition as JSON to this URL (repeatable): revision applied and ready, revision invalid, sync failed, prune refused, specs not ready in time, recovered' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l notify-secret-file -d 'File holding the secret that signs --notify requests (X-Driftless-Signature: sha256=<HMAC-SHA256 of the body>)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l notify-slack -d 'Post the same transitions to a Slack-compatible incoming webhook (repeatable). The URL is a credential: prefer the environment variable to argv' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l commit-status -d 'Set a commit status on each git revision (with --oci: on the commit each artifact was built from, its org.opencontainers.image.revision): pending when its sync starts, success when applied and every spec ready, failure otherwise. Token from DRIFTLESS_COMMIT_STATUS_TOKEN or DRIFTLESS_COMMIT_STATUS_TOKEN_FILE' -r -f -a "github\t''
gitlab\t''"
complete -c driftless -n "__fish_driftless_using_subcommand run" -l commit-status-url -d 'The provider\'s API base URL (default: https://api.github.com, https://gitlab.com/api/v4)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l commit-status-repo -d 'The repository: GitHub owner/name, GitLab project path (default: from --git; needed with --oci)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l field-manager -d 'Field manager for server-side apply' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l max-prune-ratio -d 'Refuse a revision that would prune more than this share of the inventory' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l concurrency -d 'Objects applied (or dry-run) at once' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l inventory-namespace -d 'Namespace of the inventory ConfigMaps' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l replace-on-immutable -d 'Also delete and recreate objects of this kind (KIND or KIND.GROUP, as Job.batch) when an apply is refused only for immutable fields; Jobs always are, unless their `driftless.dev/replace: never` says otherwise. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand run" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand run" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand run" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l insecure-open-listener -d 'Serve a --metrics-addr that is not loopback without an --api-token-file: whoever reaches it reads the status, the UI and /metrics (the controls stay refused). Without it, such a start is refused'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l leader-elect -d 'Only the replica holding the Lease writes; the others keep caches warm'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l shard -d 'Replicas of this instance share the tree: each applies, prunes and reports the specs of the buckets it holds, divided among the live members (a Lease each, in the inventory namespace); a member that dies has its specs taken over'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l events -d 'Record Kubernetes Events on the objects each sync changes, prunes or fails on'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l force-conflicts -d 'Take fields that other field managers own instead of reporting a conflict'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l adopt -d 'Take over existing objects driftless did not create (per spec: `adopt = true`)'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l no-prune -d 'Do not delete objects that left the specs'
complete -c driftless -n "__fish_driftless_using_subcommand run" -l allow-mass-prune -d 'Allow pruning everything, or more than --max-prune-ratio'
complete -c driftless -n "__fish_driftless_using_subcommand run" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand run" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand push" -l source -d 'The `org.opencontainers.image.source` annotation [default: the git remote `origin` of the repository holding DIR, without credentials]' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l revision -d 'The `org.opencontainers.image.revision` annotation [default: BRANCH@sha1:COMMIT of the repository holding DIR, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l created -d 'The `org.opencontainers.image.created` annotation, RFC 3339 [default: from SOURCE_DATE_EPOCH, else the HEAD commit\'s time, else 1970-01-01T00:00:00Z]: never the clock, so the same tree pushed twice has the same digest' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l allow-namespace -d 'Let specs write into this protected namespace (kube-system, kube-public, kube-node-lease, driftless-system and the inventory namespace are refused otherwise). Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l sops-age-key-file -d 'age identities (a keys file, as age-keygen writes it) to decrypt SOPS-encrypted YAML with. Without it: $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY, else sops\'s default ~/.config/sops/age/keys.txt when present' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l var -d 'Set variable NAME for `${NAME}` in spec values, over the tree\'s .driftless.toml [vars] and --vars-file. Repeatable' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l vars-file -d 'Variables for `${NAME}` from a TOML file of `NAME = "value"` lines (a cluster\'s own values), over the tree\'s .driftless.toml [vars]. Read once, at start' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l clusters -d 'The operator\'s clusters: a TOML file of `[cluster.NAME]` tables (`kubeconfig` or `secret`, `context`, `labels`) that a tree\'s `[[cluster]]` rules send files to. Without it, the one cluster is `in-cluster`, reached with --kubeconfig/--context' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l cluster-secrets-namespace -d 'A namespace of the home cluster whose Argo CD cluster Secrets (`argocd.argoproj.io/secret-type: cluster`) are clusters too, by their `name`, `server` and labels; repeatable, comma-separated. Read when the command starts' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l cluster -d 'The cluster of --clusters this command serves: only the files that go to it are read, and it is reached with its kubeconfig (default: every declared cluster: `validate`, `diff` and `apply` serve each in turn, `run` serves them all at once; `render` serves the home cluster, the one reached with --kubeconfig/--context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l kustomize -d 'The program that builds kustomizations: `kustomize` (v5), or `kubectl` (1.27 or newer, as `kubectl kustomize`). Default: `kustomize` on PATH, else `kubectl`' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l helm -d 'The helm program (3.8 or newer, or 4) that renders charts. Default: `helm` on PATH' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l render-timeout -d 'How long one render may run before it (and what it started) is killed, e.g. 90s' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l render-concurrency -d 'Rendering tools run at once at most' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l credentials-dir -d 'The directory a chart release\'s `username-file`, `password-file` and `ca-file` are read from (the operator\'s, e.g. a mounted Secret); a spec can name nothing outside it' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l plugins-dir -d 'The directory of Argo CD config management plugins (`ConfigManagementPlugin` files, as Argo CD\'s `plugin.yaml`) that Applications with `source.plugin` are rendered by; only these run, a tree never brings a command' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l cache-dir -d 'Where driftless keeps what it fetched and rendered: pulled charts, renders (an unchanged chart, kustomization or Jsonnet file is not rendered again), and with `run` the git clone or OCI artifacts [default: $CACHE_DIRECTORY from systemd, else ~/.cache/driftless]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l registry-config -d 'A Docker config.json whose `auths` holds the registry\'s credentials [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json]. Credential helpers (credsStore, credHelpers) are not run' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l username-file -d 'File holding the registry user name (with --password-file; wins over config.json)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l password-file -d 'File holding the registry password or token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l ca-file -d 'PEM certificates to trust for the registry, besides the system\'s roots' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l layer-media-type -d 'The media type of the artifact\'s layer that holds the tree (a tar+gzip) [default: application/vnd.cncf.flux.content.v1.tar+gzip, as Flux writes it]' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l verify-key -d 'Pull an artifact only when a cosign signature of its digest by this key (cosign.pub: ECDSA P-256, PEM) is found beside it (the `sha256-<hex>.sig` tag cosign writes). Keyless signatures are not checked' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand push" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand push" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand push" -l render -d 'Publish the rendered tree (what `render --out` writes: Kustomize, Helm and Jsonnet replaced by plain YAML) instead of the tree as it is'
complete -c driftless -n "__fish_driftless_using_subcommand push" -l all-or-nothing -d 'Any error stops the whole revision. Without it, an app (a Flux Kustomization, an Argo CD Application) whose render or validation fails is held alone, neither applied nor pruned, and the other apps go on'
complete -c driftless -n "__fish_driftless_using_subcommand push" -l plain-http -d 'Speak plain HTTP to the registry (no TLS): a registry on loopback or in a lab only'
complete -c driftless -n "__fish_driftless_using_subcommand push" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand push" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand status" -l status-file -d 'The daemon\'s status file [default: as `run` writes it, see `run --status-file`]. Repeated (a fleet\'s daemons, one per cluster): one row per cluster' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand status" -s o -l output -d 'How to print it' -r -f -a "table\t''
wide\t'The table with nothing cut'
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand status" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand status" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand status" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand status" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand status" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand status" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c driftless -n "__fish_driftless_using_subcommand status" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l server -d 'The daemon\'s HTTP address (its --metrics-addr), `http://` assumed without a scheme' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l token-file -d 'File holding the API token (the daemon\'s --api-token-file); or set DRIFTLESS_API_TOKEN' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l ca-file -d 'PEM certificates to trust besides the system\'s for an `https://` server (the CA that signed the daemon\'s --tls-cert-file)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l client-cert-file -d 'A client certificate (PEM, its chain after it) to present to a daemon that verifies them (its --tls-client-ca-file): the controls then need no token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l client-key-file -d 'The client certificate\'s private key (PEM: PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l timeout -d 'How long to wait for the sync to end' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand reconcile" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l reason -d 'Why; shown in the API, the status file, `driftless status` and the web UI' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l server -d 'The daemon\'s HTTP address (its --metrics-addr), `http://` assumed without a scheme' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l token-file -d 'File holding the API token (the daemon\'s --api-token-file); or set DRIFTLESS_API_TOKEN' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l ca-file -d 'PEM certificates to trust besides the system\'s for an `https://` server (the CA that signed the daemon\'s --tls-cert-file)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l client-cert-file -d 'A client certificate (PEM, its chain after it) to present to a daemon that verifies them (its --tls-client-ca-file): the controls then need no token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l client-key-file -d 'The client certificate\'s private key (PEM: PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand suspend" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l server -d 'The daemon\'s HTTP address (its --metrics-addr), `http://` assumed without a scheme' -r
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l token-file -d 'File holding the API token (the daemon\'s --api-token-file); or set DRIFTLESS_API_TOKEN' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l ca-file -d 'PEM certificates to trust besides the system\'s for an `https://` server (the CA that signed the daemon\'s --tls-cert-file)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l client-cert-file -d 'A client certificate (PEM, its chain after it) to present to a daemon that verifies them (its --tls-client-ca-file): the controls then need no token' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l client-key-file -d 'The client certificate\'s private key (PEM: PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand resume" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand resume" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand resume" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand login" -l oidc-issuer -d 'The provider\'s issuer URL (the daemon\'s --oidc-issuer)' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l oidc-client-id -d 'The client driftless is registered as with the provider; ID tokens must be for it' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l oidc-client-secret-file -d 'File holding the client\'s secret (a confidential client); without it, a public client (PKCE alone)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand login" -l oidc-scope -d 'Scopes asked for at sign-in besides openid (repeatable)' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l oidc-ca-file -d 'Trust the provider\'s certificate when this CA (PEM) signed it, or it is that self-signed certificate, besides the system\'s CAs' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand login" -l token-file -d 'Where to keep the ID token [default: ${XDG_CACHE_HOME:-~/.cache}/driftless/id-token, which the controls read when given no token]' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand login" -l timeout -d 'How long to wait for the browser' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand login" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand login" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand login" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand login" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand schema" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand schema" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand schema" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l out-dir -d 'Instead, write the scripts of every shell into this directory' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand completions" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand completions" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand completions" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand man" -l out-dir -d 'Instead, write driftless.1 and a driftless-<subcommand>.1 for every visible subcommand into this directory' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand man" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand man" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand man" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand man" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand man" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand man" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand man" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand man" -s V -l version -d 'Print version'
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l out-dir -d 'Write the pages (spec-file.md, one page per kind, cli.md, metrics.md) into this directory' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' -r -F
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l context -d 'The kubeconfig context to use (default: its current-context)' -r
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l kube-api-qps -d 'Requests per second to the apiserver at most, client-side, as client-go\'s rate limit (0: no limit). Answers 429 and 502-504 are retried either way' -r
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l kube-api-burst -d 'Requests that may go out at once above --kube-api-qps before it paces them' -r
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l log-format -d 'Log format on stderr; the level comes from RUST_LOG (default: info for `run`, warn otherwise)' -r -f -a "text\t''
json\t''"
complete -c driftless -n "__fish_driftless_using_subcommand reference" -l instance -d 'Name of this driftless instance: instances sharing a cluster never touch each other\'s objects' -r
complete -c driftless -n "__fish_driftless_using_subcommand reference" -s h -l help -d 'Print help'
complete -c driftless -n "__fish_driftless_using_subcommand reference" -s V -l version -d 'Print version'
