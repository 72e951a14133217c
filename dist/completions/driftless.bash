_driftless() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="driftless"
                ;;
            driftless,apply)
                cmd="driftless__subcmd__apply"
                ;;
            driftless,completions)
                cmd="driftless__subcmd__completions"
                ;;
            driftless,diff)
                cmd="driftless__subcmd__diff"
                ;;
            driftless,login)
                cmd="driftless__subcmd__login"
                ;;
            driftless,man)
                cmd="driftless__subcmd__man"
                ;;
            driftless,push)
                cmd="driftless__subcmd__push"
                ;;
            driftless,reconcile)
                cmd="driftless__subcmd__reconcile"
                ;;
            driftless,reference)
                cmd="driftless__subcmd__reference"
                ;;
            driftless,render)
                cmd="driftless__subcmd__render"
                ;;
            driftless,resume)
                cmd="driftless__subcmd__resume"
                ;;
            driftless,run)
                cmd="driftless__subcmd__run"
                ;;
            driftless,schema)
                cmd="driftless__subcmd__schema"
                ;;
            driftless,status)
                cmd="driftless__subcmd__status"
                ;;
            driftless,suspend)
                cmd="driftless__subcmd__suspend"
                ;;
            driftless,validate)
                cmd="driftless__subcmd__validate"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        driftless)
            opts="-h -V --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version validate render diff apply run push status reconcile suspend resume login schema completions man reference"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__apply)
            opts="-h -V --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --field-manager --force-conflicts --adopt --no-prune --max-prune-ratio --allow-mass-prune --concurrency --inventory-namespace --replace-on-immutable --wait --timeout --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --field-manager)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-prune-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inventory-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replace-on-immutable)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__completions)
            opts="-h -V --out-dir --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__diff)
            opts="-o -h -V --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --field-manager --force-conflicts --adopt --no-prune --max-prune-ratio --allow-mass-prune --concurrency --inventory-namespace --replace-on-immutable --output --base --head --nodes --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --field-manager)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-prune-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inventory-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replace-on-immutable)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -W "text markdown json" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "text markdown json" -- "${cur}"))
                    return 0
                    ;;
                --base)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --head)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__login)
            opts="-h -V --oidc-issuer --oidc-client-id --oidc-client-secret-file --oidc-scope --oidc-ca-file --token-file --timeout --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --oidc-issuer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-client-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-client-secret-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-scope)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__man)
            opts="-h -V --out-dir --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__push)
            opts="-h -V --render --source --revision --created --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --source)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --created)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__reconcile)
            opts="-h -V --server --token-file --ca-file --client-cert-file --client-key-file --timeout --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --server)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__reference)
            opts="-h -V --out-dir --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__render)
            opts="-h -V --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --nodes --out --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__resume)
            opts="-h -V --server --token-file --ca-file --client-cert-file --client-key-file --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --server)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__run)
            opts="-h -V --dir --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --git --branch --tag --oci --semver --digest --commit --verify-commits --path --interval --resync --status-file --metrics-addr --tls-cert-file --tls-key-file --tls-client-ca-file --insecure-open-listener --hook-secret-file --leader-elect --lease-namespace --lease-name --shard --shard-identity --shard-lease --ready-timeout --sync-timeout --events --api-token-file --drift --oidc-issuer --oidc-client-id --oidc-client-secret-file --oidc-scope --oidc-ca-file --oidc-username-claim --oidc-username-prefix --oidc-groups-claim --oidc-groups-prefix --oidc-clock-skew --session-duration --external-url --notify --notify-secret-file --notify-slack --commit-status --commit-status-url --commit-status-repo --field-manager --force-conflicts --adopt --no-prune --max-prune-ratio --allow-mass-prune --concurrency --inventory-namespace --replace-on-immutable --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --git)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --branch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tag)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oci)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --semver)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --digest)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --commit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-commits)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resync)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-addr)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-client-ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hook-secret-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lease-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lease-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --shard-identity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --shard-lease)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ready-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sync-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drift)
                    COMPREPLY=($(compgen -W "correct report" -- "${cur}"))
                    return 0
                    ;;
                --oidc-issuer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-client-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-client-secret-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-scope)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-username-claim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-username-prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-groups-claim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-groups-prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --oidc-clock-skew)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --session-duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --external-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --notify)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --notify-secret-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --notify-slack)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --commit-status)
                    COMPREPLY=($(compgen -W "github gitlab" -- "${cur}"))
                    return 0
                    ;;
                --commit-status-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --commit-status-repo)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --field-manager)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-prune-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inventory-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replace-on-immutable)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__schema)
            opts="-h -V --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__status)
            opts="-o -h -V --status-file --output --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -W "table wide json" -- "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -W "table wide json" -- "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__suspend)
            opts="-h -V --reason --server --token-file --ca-file --client-cert-file --client-key-file --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --reason)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --client-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        driftless__subcmd__validate)
            opts="-h -V --allow-namespace --sops-age-key-file --var --vars-file --all-or-nothing --clusters --cluster-secrets-namespace --cluster --kustomize --helm --render-timeout --render-concurrency --credentials-dir --plugins-dir --cache-dir --registry-config --username-file --password-file --ca-file --plain-http --layer-media-type --verify-key --kubeconfig --context --kube-api-qps --kube-api-burst --log-format --instance --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --allow-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sops-age-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --var)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vars-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --clusters)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secrets-namespace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kustomize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --helm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render-concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credentials-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plugins-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --username-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layer-media-type)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-qps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-api-burst)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --instance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _driftless -o nosort -o bashdefault -o default driftless
else
    complete -F _driftless -o bashdefault -o default driftless
fi
