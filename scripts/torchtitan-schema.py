#!/usr/bin/env python3
"""Writes the keys of torchtitan's TOML job schema, one per line:

    SECTION<TAB>KEY<TAB>TYPE<TAB>DEFAULT

SECTION is dotted for nested tables (training.dataloader,
quantize.linear.float8); DEFAULT is a TOML value, or None where torchtitan's
default is Python's None. It reads job_config.py with the ast module (nothing
of torchtitan is imported), walking the fields of class JobConfig.

Usage: scripts/torchtitan-schema.py [JOB_CONFIG_PY] > tests/fixtures/torchtitan_schema.txt
Without an argument it reads the last TOML schema from the torchtitan mirror:
    git -C MIRROR show 238fa995...:torchtitan/config/job_config.py
Not needed to build or test titan: tests read the checked-in output.
"""
import ast
import json
import os
import subprocess
import sys

LAST_TOML_COMMIT = "238fa9953e4aec2a62582121564273d7cbb1e9f1"
MIRROR = os.environ.get("TORCHTITAN_MIRROR", "/work/.mirror/pytorch+torchtitan/repo")


def source(argv):
    if len(argv) > 1:
        with open(argv[1], encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "-C", MIRROR, "show", LAST_TOML_COMMIT + ":torchtitan/config/job_config.py"],
                          check=True, capture_output=True, text=True).stdout


def toml_value(v):
    """A Python literal as TOML writes it; None stays None."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise ValueError("no TOML form for %r" % (v,))


def default_of(node, classes):
    """(TOML default, nested class name or None) of a field's right-hand side."""
    if node is None:
        return "None", None
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "field":
        for kw in node.keywords:
            if kw.arg == "default":
                return toml_value(ast.literal_eval(kw.value)), None
            if kw.arg == "default_factory":
                f = kw.value
                if isinstance(f, ast.Name) and f.id in classes:
                    return None, f.id
                if isinstance(f, ast.Name) and f.id == "list":
                    return "[]", None
                if isinstance(f, ast.Name) and f.id == "dict":
                    return "{}", None
                if isinstance(f, ast.Lambda):
                    return toml_value(ast.literal_eval(f.body)), None
        raise ValueError("field() without a default: " + ast.unparse(node))
    return toml_value(ast.literal_eval(node)), None


def walk(classes, name, section, out):
    for stmt in classes[name].body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        key = stmt.target.id
        default, nested = default_of(stmt.value, classes)
        if nested:
            walk(classes, nested, section + "." + key if section else key, out)
        else:
            out.append((section, key, ast.unparse(stmt.annotation), default))


def main(argv):
    tree = ast.parse(source(argv))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    rows = []
    walk(classes, "JobConfig", "", rows)
    for section, key, typ, default in rows:
        print("\t".join((section, key, typ, default)))


if __name__ == "__main__":
    main(sys.argv)
