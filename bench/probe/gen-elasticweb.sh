#!/bin/bash
# gen-elasticweb.sh DIR N NAMESPACE: N files of one [elasticweb.wNNNNN] each, total-qps = 0
# (the #47 issue's tree).
dir=$1; n=$2; ns=$3
rm -rf "$dir"; mkdir -p "$dir"
for ((i=0;i<n;i++)); do
  printf 'namespace = "%s"\n[elasticweb.w%05d]\nimage = "nginx:1.17.1"\nsingle-pod-qps = 100\ntotal-qps = 0\n' "$ns" "$i" > "$dir/w$(printf %05d $i).toml"
done
