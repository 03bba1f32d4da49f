"""Strict JSON schema (draft-07) of one Kubernetes kind from the OpenAPI v2 spec, every $ref inlined.

Usage: openapi_strict.py swagger.json DEFINITION GROUP VERSION KIND TITLE > kind.group_version-strict.json
Run on io.k8s.api.apps.v1.Deployment it reproduces deployment.apps_v1-strict.json exactly.
"""
import json, sys, copy
spec = json.load(open(sys.argv[1]))
defs = spec['definitions']
name, group, version, kind, title = sys.argv[2:7]

def resolve(node):
    if isinstance(node, list):
        return [resolve(n) for n in node]
    if not isinstance(node, dict):
        return node
    if '$ref' in node:
        target = node['$ref'].split('/')[-1]
        out = resolve(copy.deepcopy(defs[target]))
        if target == 'io.k8s.apimachinery.pkg.api.resource.Quantity':
            out.pop('type', None)
            out['anyOf'] = [{'type': 'number'}, {'type': 'string'}]
        for k, v in node.items():
            if k != '$ref':
                out[k] = resolve(v)
        return out
    out = {}
    for k, v in node.items():
        out[k] = resolve(v) if k in ('properties',) and False else (
            {pk: resolve(pv) for pk, pv in v.items()} if k == 'properties' else resolve(v))
    if out.get('format') == 'int-or-string':
        out.pop('format'); out.pop('type', None)
        out['anyOf'] = [{'type': 'integer'}, {'type': 'string'}]
    if out.get('x-kubernetes-list-type') == 'set':
        out['uniqueItems'] = True
    if out.get('properties'):
        out.setdefault('additionalProperties', False)
    return out

root = resolve(copy.deepcopy(defs[name]))
root['properties']['apiVersion']['enum'] = [f'{group}/{version}' if group else version]
root['properties']['kind']['enum'] = [kind]
root['required'] = sorted(set(root.get('required', [])) | {'apiVersion', 'kind'})
out = {
    '$schema': 'http://json-schema.org/draft-07/schema#',
    'title': title,
    'x-kubernetes-group-version-kind': [{'group': group, 'kind': kind, 'version': version}],
    'x-upstream': {
        'repo': 'kubernetes-client/python',
        'path': 'kubernetes/swagger.json.unprocessed (upstream Kubernetes OpenAPI v2 spec, release-1.36)',
        'ref': 'v36.0.3 (Kubernetes 1.36)',
        'commit': '67e7d9abfc6fe6629fa650d9b0abf4c99ef8c39c',
        'definition': name,
    },
}
for k in ('description', 'properties', 'type', 'additionalProperties', 'required'):
    if k in root:
        out[k] = root[k]
print(json.dumps(out, indent=2, sort_keys=False))
