#!/usr/bin/env python3
"""Every `headlab ...` command in README.md and docs/*.md names a real command
and only flags that command has (as `headlab CMD --help` lists them), so the
docs cannot drift from the code.

    tests/cli/docs_commands_test.py HEADLAB [REPO_ROOT]

Commands are read from fenced code blocks (a line ending in a backslash goes
on on the next) and from inline code spans; `build/headlab`, `mpirun -np N
headlab` and `srun ... headlab` count too. Only flag names are checked, not
values: placeholders (RUN_DIR, $seed) stand where values go. Exit status: 0
when every command parses, 1 listing each one that does not."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

COMMANDS = ("train", "eval", "analyze", "sweep", "tasks", "gradcheck", "bench")


def help_flags(headlab, command):
    args = [headlab] + ([command] if command else []) + ["--help"]
    text = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", text))


def snippets(text):
    """(line number, command text) of every code block line and inline span;
    not of Python blocks, whose `from headlab import ...` is no command."""
    out, block, python, joined, start = [], False, False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            block = not block
            python = block and line.lstrip()[3:].strip() == "python"
            continue
        if block and python:
            continue
        if block:
            if not joined:
                start = number
            joined += line.rstrip("\\") + " "
            if not line.rstrip().endswith("\\"):
                out.append((start, joined))
                joined = ""
        else:
            out.extend((number, span) for span in re.findall(r"`([^`]+)`", line))
    return out


def commands(snippet):
    """The argument lists after each `headlab` in a snippet (up to a shell separator or comment)."""
    text = snippet.replace("\\|", "|")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        return []
    found = []
    for i, token in enumerate(tokens):
        # Not a flag's value (bench/compare_torch.py --headlab build/headlab).
        if (token == "headlab" or token.endswith("/headlab")) and not (i > 0 and tokens[i - 1].startswith("--")):
            args = []
            for t in tokens[i + 1:]:
                if t and set(t) <= set(";&|<>"):
                    break
                args.append(t)
            found.append(args)
    return found


def main():
    headlab = sys.argv[1]
    root = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[2])
    flags = {c: help_flags(headlab, c) for c in COMMANDS}
    flags[""] = help_flags(headlab, "")
    bad, checked = [], 0
    for doc in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        for number, snippet in snippets(doc.read_text(encoding="utf-8")):
            for args in commands(snippet):
                args = [a.strip("[]") for a in args]
                if not args or args[0].startswith("-"):
                    command, rest = "", args
                elif args[0] in COMMANDS:
                    command, rest = args[0], args[1:]
                elif args[0].isupper() or not re.fullmatch(r"[a-z-]+", args[0]):
                    continue  # a synopsis (headlab COMMAND [flags]) or prose (the headlab binary)
                else:
                    bad.append(f"{doc.relative_to(root)}:{number}: unknown command 'headlab {args[0]}'")
                    continue
                checked += 1
                for a in rest:
                    flag = a.split("=", 1)[0]
                    if re.fullmatch(r"--[a-z0-9][a-z0-9-]*", flag) and flag not in flags[command]:
                        bad.append(f"{doc.relative_to(root)}:{number}: 'headlab {command}' has no flag {flag}")
    for line in bad:
        print("docs_commands_test:", line, file=sys.stderr)
    print(f"docs_commands_test: {checked} commands checked, {len(bad)} problems")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
