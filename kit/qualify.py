"""`python3 -m kit.qualify vllm 0.34.0 [--wheel FILE] [--out DIR] [--against DIR]`

1. imports the release's own code from its wheel (kit.engine; stubs recorded);
2. recomputes every block-hash case of the nearest known release's vector files (their
   `inputs`) with the release's own functions, and the release's rule constants
   (`CacheConfig.DEFAULT_BLOCK_SIZE`, ...);
3. writes the vector files (project format) under --out, with a header recording every engine
   function run (module:qualname -> sha256 of its source), the stubs and imported versions;
4. diffs against the nearest known release's files, case by case and field by field, and
   against that release's recorded function sources, and prints which rules changed and a
   draft catalog entry for review.

An engine function the kit relies on that is missing or has other parameters fails loudly
(exit 3, the function named) and nothing is written.
"""

import argparse
import json
import os
import sys
import time

from . import engine as engine_mod
from .engine import ROOT, EngineChanged

VECTORS = os.path.join(ROOT, "testdata", "vectors")
BLOCK_FILES = ["block_hashes.json", "block_hashes_sha256.json", "block_hashes_xxhash.json", "block_hashes_xxhash_cbor.json"]

# The vector folder of each known release (the reference sets live outside versions/).
REFERENCE = {("vllm", "0.31.0"): "vllm", ("sglang", "0.5.19"): "sglang"}


def _vkey(v):
    out = []
    for p in v.replace("rc", ".").split("."):
        out.append(int(p) if p.isdigit() else 0)
    return out


def known_sets(engine):
    """{version: folder} of the project's vector sets for `engine`."""
    out = {}
    for (e, v), d in REFERENCE.items():
        if e == engine:
            out[v] = os.path.join(VECTORS, d)
    vd = os.path.join(VECTORS, "versions")
    for name in os.listdir(vd):
        if name.startswith(engine + "-") and os.path.isdir(os.path.join(vd, name)):
            out[name[len(engine) + 1:]] = os.path.join(vd, name)
    return out


def nearest(engine, version, exclude_self=True):
    sets = known_sets(engine)
    below = [v for v in sets if _vkey(v) < _vkey(version) or (not exclude_self and v == version)]
    if not below:
        return None, None
    v = max(below, key=_vkey)
    return v, sets[v]


def diff_case(exp, got, path=""):
    """Field paths where two JSON values differ (first few)."""
    out = []
    if isinstance(exp, dict) and isinstance(got, dict):
        for k in sorted(set(exp) | set(got)):
            if k not in got or k not in exp:
                out.append(f"{path}.{k}")
            else:
                out.extend(diff_case(exp[k], got[k], f"{path}.{k}"))
    elif isinstance(exp, list) and isinstance(got, list):
        if len(exp) != len(got):
            out.append(f"{path}[len {len(exp)} vs {len(got)}]")
        for i, (a, b) in enumerate(zip(exp, got)):
            out.extend(diff_case(a, b, f"{path}[{i}]"))
    elif exp != got:
        out.append(path or ".")
    return out[:8]


def run_vllm(eng, inputs_from, out_dir):
    from .vllm_hashes import VllmHasher

    from . import vllm_rules

    h = VllmHasher(eng)
    rules = {"lookahead": h.lookahead}
    rules.update(vllm_rules.probe(eng))
    rules.update(vllm_rules.probe_chat(eng))
    files = {}
    for f in BLOCK_FILES:
        src = os.path.join(inputs_from, f)
        if not os.path.exists(src):
            continue
        doc = json.load(open(src))
        cases = []
        for c in doc["cases"]:
            inputs = c["inputs"]
            if inputs.get("num_hash_lookahead_tokens") and not h.lookahead:
                continue
            cases.append({"name": c["name"], "description": c.get("description", ""), "inputs": inputs, "expected": h.case(inputs)})
        files[f] = {"engine": "vllm", "engine_version": eng.version, "generator": "kit/qualify.py", "cases": cases}
    src = os.path.join(inputs_from, "kv_events.json")
    if os.path.exists(src):
        from .vllm_events import VllmEvents

        doc = json.load(open(src))
        produced = VllmEvents(eng, h).run(doc)
        cases = []
        for c in doc["cases"]:
            if c["name"] in produced:
                cases.append({"name": c["name"], "description": c.get("description", ""),
                              "inputs": c.get("inputs", {}), **produced[c["name"]]})
        files["kv_events.json"] = {"engine": "vllm", "engine_version": eng.version,
                                   "generator": "kit/qualify.py (BlockPool + ZmqEventPublisher)", "cases": cases}
    return rules, files


def run_vllm_cachehit(eng, version, inputs_version, out_dir, cachehit_dir=None):
    """Replays the project's cache-hit files of `inputs_version` through the release's own
    KVCacheManager, the speculative-decoding deployments (`specdec-*`, a `deployment` header)
    with the deployment's own setup (`kit/vllm_cachehit.py`; a deployment the kit does not know
    is skipped, loudly); returns ({file: report}, {output name: produced replay})."""
    from .vllm_cachehit import Replay, unsupported
    from .vllm_hashes import VllmHasher

    d = cachehit_dir or os.path.join(VECTORS, "cachehit")
    rp = None
    report = {}
    outputs = {}
    for f in sorted(os.listdir(d)):
        if not f.startswith(f"vllm-{inputs_version}-") or not f.endswith(".json"):
            continue
        doc = json.load(open(os.path.join(d, f)))
        why = unsupported(doc)
        if why:
            print(f"kit: SKIPPED cachehit/{f}: {why}", file=sys.stderr)
            report[f] = {"reproduced": 0, "total": 0, "differ": [], "skipped": why}
            continue
        if rp is None:
            rp = Replay(eng, VllmHasher(eng))
        ok, n, fails = rp.run(doc)
        outdoc = {k: v for k, v in doc.items() if k != "steps"}
        outdoc.update({"engine_version": eng.version, "generator": "kit/qualify.py (KVCacheManager replay)",
                       "steps": rp.produced})
        name = f.replace(f"vllm-{inputs_version}-", f"vllm-{version}-")
        report[f] = {"reproduced": ok, "total": n, "differ": [(x, []) for x in fails[:20]], "new_cases": []}
        dr = rp.deployment_report
        if dr:  # the deployment values the release derives from the speculative config
            outdoc["deployment"] = {**doc["deployment"], **{k: v for k, v in dr["values"].items() if "." not in k}}
            report[f]["deployment_derived"] = {"same": dr["same"], "total": dr["total"], "values": dr["values"]}
        outputs["cachehit-" + name] = outdoc
    return report, outputs


def run_sglang_cachehit(eng, version, inputs_version, cachehit_dir=None):
    """Replays the project's `cachehit/sglang-<inputs_version>-*.json` files (the EAGLE
    deployment's included: `deployment.radix_is_eagle`) through the release's own RadixCache and
    scheduler request/allocation code; returns ({file: report}, {output name: produced replay})."""
    from .sglang_cachehit import Replay, extracted_sources_match

    d = cachehit_dir or os.path.join(VECTORS, "cachehit")
    report, outputs = {}, {}
    for f in sorted(os.listdir(d)):
        if not f.startswith(f"sglang-{inputs_version}-") or not f.endswith(".json"):
            continue
        doc = json.load(open(os.path.join(d, f)))
        dep = doc.get("deployment")
        if dep is not None and set(dep) - {"speculative", "radix_is_eagle"}:
            report[f] = {"reproduced": 0, "total": 0, "differ": [],
                         "skipped": f"deployment {sorted(dep)} (the kit replays radix_is_eagle only)"}
            continue
        rp = Replay(eng)
        ok, n, fails = rp.run(doc)
        outdoc = {k: v for k, v in doc.items() if k != "steps"}
        outdoc.update({"engine_version": eng.version, "generator": "kit/qualify.py (RadixCache replay)",
                       "steps": rp.produced})
        outputs["cachehit-" + f.replace(f"sglang-{inputs_version}-", f"sglang-{version}-")] = outdoc
        report[f] = {"reproduced": ok, "total": n, "differ": [(x, []) for x in fails[:20]], "new_cases": [],
                     "engine_source_extracted": extracted_sources_match(eng.src, doc.get("engine_source_extracted", {}))}
    return report, outputs


def run_chat(engine, version, src_dir, templates_dir, model_types):
    """The chat step in its own process (transformers and tokenizers real, at the wheel's
    pins): ({"templates/<file>": report}, {output name: file}, record)."""
    import subprocess

    from . import chat

    p, chosen_by = chat.stack(src_dir, engine, version, templates_dir)
    if p is None:
        return {"templates": {"reproduced": 0, "total": 0, "differ": [], "skipped": chosen_by}}, {}, None
    env = dict(os.environ, KIT_CHAT_DEPS=chat.deps_dir(p))
    cmd = [sys.executable, "-m", "kit.chat", engine, version, "--templates", templates_dir, "--json"]
    for m in model_types:
        cmd += ["--model-type", m]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode == 3:
        raise EngineChanged(r.stderr.strip().split("ENGINE_CHANGED: ", 1)[-1])
    if r.returncode != 0:
        raise RuntimeError(f"kit.chat failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["record"]["chat_libraries"] = out["versions"]
    out["record"]["chat_libraries_chosen_by"] = chosen_by
    out["record"]["chat_seconds"] = out["seconds"]
    rel = os.path.relpath(templates_dir, VECTORS)
    report = {f"{rel}/{f}": {"reproduced": 0, "total": 0, "differ": [], **v} for f, v in out["report"].items()}
    files = {}
    for f, doc in out["files"].items():
        doc["kit"] = {**out["record"], "chat_libraries": out["versions"], "chat_libraries_chosen_by": chosen_by,
                      "templates_from": rel}
        files["chat-" + f] = doc
    return report, files, out["record"]


def compare(files, against_dir):
    """Per file: (reproduced, total, [(case, fields)]) against the files in `against_dir`."""
    report = {}
    for f, doc in files.items():
        p = os.path.join(against_dir, f)
        if f.endswith("-namespaces.json") and os.path.exists(os.path.join(VECTORS, "kit", f)):
            p = os.path.join(VECTORS, "kit", f)  # the kit's own committed run of this release
        if not os.path.exists(p):
            if f.endswith("-namespaces.json"):  # new: no expected values; the kit's own checks
                bad = [(c["name"], [k for k, v in c["expected"]["kit_checks"].items() if not v]) for c in doc["cases"]
                       if not all(c["expected"]["kit_checks"].values())]
                report[f] = {"reproduced": len(doc["cases"]) - len(bad), "total": len(doc["cases"]), "differ": bad,
                             "new_cases": [], "new_file": "no expected values: the kit's consistency checks"}
            continue
        if f == "kv_events.json" and doc.get("engine") == "sglang":
            from .sglang_events import compare as sglang_events_compare

            ok, total, bad = sglang_events_compare(json.load(open(p)), doc)
            report[f] = {"reproduced": ok, "total": total, "differ": bad, "new_cases": []}
            continue
        exp = {c["name"]: c for c in json.load(open(p))["cases"]}
        got = {c["name"]: c for c in doc["cases"]}
        ok, bad = 0, []
        for name, c in exp.items():
            if name not in got:
                bad.append((name, ["(not computed)"]))
                continue
            if "expected" in c and doc.get("engine") == "sglang" and f == "block_hashes.json":
                from .sglang_hashes import compare_case

                d = compare_case(c["expected"], got[name]["expected"])
            elif "expected" in c:
                d = diff_case(c["expected"], got[name]["expected"])
            else:  # event cases: the wire frames and their schema-less decode
                from .vllm_events import COMPARED

                d = [k for k in COMPARED if k in c and c[k] != got[name].get(k)]
            if d:
                bad.append((name, d))
            else:
                ok += 1
        extra = sorted(set(got) - set(exp))
        report[f] = {"reproduced": ok, "total": len(exp), "differ": bad, "new_cases": extra}
    return report


def _defined(key):
    """Whether the release being qualified defines `module:qualname` (imported already)."""
    import importlib

    mod, _, qual = key.partition(":")
    try:
        obj = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return True
    except Exception:
        return False


def rule_changes(engine, rules, prev_rules, fn_new, fn_prev):
    changes = []
    for k, v in rules.items():
        if prev_rules.get(k) != v:
            changes.append(f"{k}: {prev_rules.get(k)} -> {v}")
    for k in sorted(set(fn_new) | set(fn_prev)):
        if k in fn_prev and k not in fn_new and _defined(k):
            continue  # defined, but not run here (this qualification had no inputs that need it)
        if fn_new.get(k) != fn_prev.get(k):
            changes.append(f"function {k}: " + ("source changed" if k in fn_new and k in fn_prev else "added" if k in fn_new else "gone"))
    return changes


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kit.qualify")
    ap.add_argument("engine", choices=["vllm", "sglang"])
    ap.add_argument("version")
    ap.add_argument("--wheel", help="a wheel file instead of `pip download`")
    ap.add_argument("--out", help="write the vector files here (default .kit-cache/out/<engine>-<version>)")
    ap.add_argument("--against", help="the vector folder to compare with (default: the nearest known release's)")
    ap.add_argument("--inputs", help="the vector folder whose case inputs are run (default: the nearest known release's)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--no-replays", action="store_true", help="skip the cache-hit replays")
    ap.add_argument("--no-chat", action="store_true", help="skip the chat rendering / tokenizer step")
    ap.add_argument("--model-type", action="append", default=[], metavar="MODEL=TYPE",
                    help="chat step: config.json's model_type for a model folder without one")
    ap.add_argument("--cachehit", help="the folder of cache-hit files to replay (default testdata/vectors/cachehit)")
    ap.add_argument("--require", action="append", default=[], metavar="MODULE:QUALNAME",
                    help="also rely on this engine function (how the selftest checks the refusal)")
    a = ap.parse_args(argv)
    t0 = time.time()
    prev_v, prev_dir = nearest(a.engine, a.version)
    own = known_sets(a.engine).get(a.version)
    if prev_dir is None and own is None and a.inputs is None:
        print(f"kit: no known {a.engine} release at or below {a.version}: give --inputs", file=sys.stderr)
        return 2
    inputs_from = a.inputs or own or prev_dir
    against = a.against or own or prev_dir
    out = a.out or os.path.join(engine_mod.CACHE, "out", f"{a.engine}-{a.version}")
    try:
        eng = engine_mod.Engine(a.engine, a.version, a.wheel)
        for req in a.require:
            mod, _, qual = req.partition(":")
            eng.fn(mod, qual)
        replays, replay_files = {}, {}
        chat_record = None
        if a.engine == "vllm":
            rules, files = run_vllm(eng, inputs_from, out)
            if not a.no_replays:
                base = os.path.basename(inputs_from)
                inputs_version = "0.31.0" if base == "vllm" else base.split("-", 1)[-1]
                replays, replay_files = run_vllm_cachehit(eng, a.version, inputs_version, out, a.cachehit)
            if not a.no_chat:  # chat rendering / tokenizer loading (kit/vllm_chat.py), own process
                own_t = os.path.join(inputs_from, "templates")
                tdir = own_t if os.path.isdir(own_t) else os.path.join(VECTORS, "templates")
                chat_report, chat_files, chat_record = run_chat("vllm", a.version, eng.src, tdir, a.model_type)
                replays.update(chat_report)
                replay_files.update(chat_files)
        else:
            from .sglang_hashes import run_sglang
            rules, files = run_sglang(eng, inputs_from)
            if not a.no_replays:
                base = os.path.basename(inputs_from)
                inputs_version = "0.5.19" if base == "sglang" else base.split("-", 1)[-1]
                replays, replay_files = run_sglang_cachehit(eng, a.version, inputs_version, a.cachehit)
            if not a.no_chat:
                own_t = os.path.join(inputs_from, "templates")
                tdir = own_t if os.path.isdir(own_t) else os.path.join(VECTORS, "templates")
                chat_report, chat_files, chat_record = run_chat("sglang", a.version, eng.src, tdir, a.model_type)
                replays.update(chat_report)
                replay_files.update(chat_files)
    except EngineChanged as e:
        print(f"KIT REFUSED ENGINE_CHANGED: {e}", file=sys.stderr)
        print("nothing written", file=sys.stderr)
        return 3
    header = eng.record()
    if chat_record:  # the chat step's process: its engine functions and real libraries
        header["chat_engine_functions_run"] = chat_record["engine_functions_run"]
        header["chat_imported_versions"] = chat_record["imported_versions"]
        header["chat_libraries_chosen_by"] = chat_record["chat_libraries_chosen_by"]
        header["chat_seconds"] = chat_record["chat_seconds"]
        if chat_record.get("kit_standins"):  # vLLM: the model folder, ModelConfig and VllmConfig stand-ins
            header["chat_kit_standins"] = chat_record["kit_standins"]
            header["chat_stubs_added"] = [s for s in chat_record["stubs"] if s["module"] not in engine_mod.STUBS]
    header["rules"] = rules
    header["inputs_from"] = os.path.relpath(inputs_from, ROOT)
    os.makedirs(out, exist_ok=True)
    for f, doc in files.items():
        doc["kit"] = header
        with open(os.path.join(out, f), "w") as fh:
            json.dump(doc, fh, indent=1)
    for f, doc in replay_files.items():
        doc["kit"] = header
        with open(os.path.join(out, f), "w") as fh:
            json.dump(doc, fh, indent=1)
    with open(os.path.join(out, "kit-record.json"), "w") as fh:
        json.dump(header, fh, indent=1, sort_keys=True)
    report = compare(files, against)
    for f, r in replays.items():
        report[f if f.startswith(("templates", "versions/")) else "cachehit/" + f] = r
    # The nearest release's rules and function sources, run through the same kit (cached).
    prev_rec = os.path.join(engine_mod.CACHE, "out", f"{a.engine}-{prev_v}", "kit-record.json")
    prev = json.load(open(prev_rec)) if prev_v and os.path.exists(prev_rec) else None
    changes = (
        rule_changes(a.engine, rules, prev["rules"], header["engine_functions_run"], prev["engine_functions_run"])
        if prev else ["(no known release below)" if not prev_v else
                      "(nearest release not run through the kit yet: run `python3 -m kit.qualify %s %s` first)" % (a.engine, prev_v)]
    )
    if a.engine == "vllm" and prev and header.get("chat_engine_functions_run") and prev.get("chat_engine_functions_run"):
        # Both runs had the chat step: its engine functions, compared the same way.
        new_c, prev_c = header["chat_engine_functions_run"], prev["chat_engine_functions_run"]
        changes += [f"function (chat step) {k}: " + ("source changed" if k in new_c and k in prev_c else
                                                     "added" if k in new_c else "gone")
                    for k in sorted(set(new_c) | set(prev_c)) if new_c.get(k) != prev_c.get(k)]
    elapsed = time.time() - t0
    result = {
        "engine": a.engine, "version": a.version, "nearest_known": prev_v,
        "compared_with": os.path.relpath(against, ROOT), "out": os.path.relpath(out, ROOT),
        "files": {f: {k: v for k, v in r.items() if k != "differ"} | {"differ": r["differ"][:20]} for f, r in report.items()},
        "rule_changes": changes, "stubs": header["stubs"], "seconds": round(elapsed, 1),
    }
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{a.engine} {a.version}: own code from {os.path.basename(eng.wheel)}; nearest known release {prev_v}")
        for f, r in report.items():
            if r.get("skipped"):
                print(f"  {f}: skipped ({r['skipped']})")
                continue
            src = ("testdata/vectors" if f.startswith(("cachehit/", "templates/", "versions/")) else
                   "testdata/vectors/kit" if f.endswith("-namespaces.json") else os.path.relpath(against, ROOT))
            if r.get("new_file"):
                print(f"  {f}: new file, {r['reproduced']}/{r['total']} cases pass {r['new_file']}")
                continue
            print(f"  {f}: {r['reproduced']}/{r['total']} cases of {src} reproduced"
                  + (f", {len(r['new_cases'])} new cases" if r.get("new_cases") else "")
                  + (f"; its engine_source_extracted: {r['engine_source_extracted']['same']}/"
                     f"{r['engine_source_extracted']['total']} definitions the same in this wheel"
                     if "engine_source_extracted" in r else "")
                  + (f"; its deployment as this release derives it from the speculative config: "
                     f"{r['deployment_derived']['same']}/{r['deployment_derived']['total']} values the same"
                     if "deployment_derived" in r else "")
                  + (f"; tokenizer {r['tokenizer_class']} (files: {r['tokenizer_class_recorded']} with "
                     f"{a.engine} {r['recorded_with']})" if r.get("tokenizer_class_recorded") else ""))
            for name, d in r["differ"][:10]:
                print(f"    differs: {name}: {', '.join(d)}")
        print(f"  rule changes vs {prev_v}:")
        for c in changes:
            print(f"    - {c}")
        print(f"  stubs installed: {', '.join(s['module'] for s in header['stubs'])}")
        print(f"  engine functions run: {len(header['engine_functions_run'])} (in {os.path.relpath(out, ROOT)}/kit-record.json)")
        print(f"  vector files written to {os.path.relpath(out, ROOT)}")
        print("  draft catalog entry (review every line):")
        print(draft_entry(a.engine, a.version, rules, changes, prev_v))
        print(f"  took {elapsed:.1f} s" + (f" (chat step's process {header['chat_seconds']} s)" if chat_record else ""))
    return 0


def draft_entry(engine, version, rules, changes, prev_v):
    mm = version if engine == "sglang" else ".".join(version.split(".")[:2])
    lines = [
        f"  - id: {engine}-<contract>-r{mm}   # pick the contract",
        f"    engine: {engine}",
        f"    versions: [{version}]",
        "    evidence:",
        f"      vectors: [versions/{engine}-{version}]",
        f"      note: >-  kit run vs {prev_v}: " + "; ".join(c for c in changes if not c.startswith("(")),
    ]
    if engine == "sglang":
        lines += ["    hash:", f"      widePages: {'true' if rules.get('wide_pages') else 'false'}",
                  "      defaultBlockSize: 16   # the gateway's; SGLang resolves page_size per backend",
                  f"    events:  # {rules.get('event_encoding')} encoding, BlockStored fields {rules.get('block_stored_fields')}"]
    if engine == "vllm":
        lines += [
            "    hash:",
            f"      defaultBlockSize: {rules['default_block_size']}",
            f"      lookahead: {'true' if rules['lookahead'] else 'false'}",
            "      # noneHash / extraKeys: as the nearest release unless a block file differs",
        ]
    return "\n".join("    " + l for l in lines)


if __name__ == "__main__":
    sys.exit(main())
