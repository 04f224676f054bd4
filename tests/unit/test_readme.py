"""The README's command list against the `citeflow` parser itself (jobs/cli/parser.py), and the README's width.

Every subcommand has one entry (a list item of the Command reference, which may wrap over several lines); every
option an entry names exists on that subcommand (or, in a code span that opens with another subcommand, such as
`run --set`, on that one); every option of a subcommand is named in its entry or listed in LEFT_TO_HELP; the global
options are named in the section's text. A subcommand or a user-facing option added without a README entry fails
here.
"""

import argparse
import collections
import re
from pathlib import Path

from citeflow.jobs.cli.parser import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"

# Options a subcommand's entry leaves to `citeflow <command> --help`, each covered by the page named beside it.
LEFT_TO_HELP = {
    # how many corpus files a snapshot has (default: one per 50,000 papers): docs/synthetic-corpus.md
    "generate": {"--shards"},
    # MTEB protocol switches whose defaults are SCIDOCS' own settings: docs/benchmarks-mteb.md
    "benchmark": {"--similarity", "--ignore-identical-ids"},
}
# argparse's own option, on every parser
HELP = {"-h", "--help"}
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def command_section(readme: str) -> str:
    return readme.split("\n## Command reference\n", 1)[1].split("\n## ", 1)[0]


def command_entries(readme: str) -> list[tuple[str, str]]:
    """(command, whole entry) for each entry of the command reference list: a line "- `COMMAND ...`" and the
    indented lines that continue it, joined by spaces."""
    entries: list[str] = []
    continues = False
    for line in command_section(readme).splitlines():
        if line.startswith("- `"):
            entries.append(line)
            continues = True
        elif continues and line.startswith("  ") and line.strip():
            entries[-1] += " " + line.strip()
        else:
            continues = False
    return [(re.match(r"- `([a-z][a-z-]*)", entry)[1], entry) for entry in entries]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(sub.choices)


def options(parser: argparse.ArgumentParser) -> list[set[str]]:
    """Each option of a parser as the set of its spellings, but argparse's --help and options hidden from --help."""
    return [
        set(action.option_strings)
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS and not HELP & set(action.option_strings)
    ]


def named(text: str, spelling: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text) is not None


def entry_options(command: str, entry: str, commands: dict) -> dict[str, set[str]]:
    """The long options an entry names, by the subcommand they belong to: the entry's own, but for those of a code
    span that opens with another subcommand (`run --set` in the settings entry), which are that one's."""
    found = collections.defaultdict(set)
    for span in re.findall(r"`([^`]*)`", entry):
        words = span.removeprefix("citeflow ").split()
        owner = words[0] if words and words[0] in commands else command
        found[owner] |= set(LONG_OPTION.findall(span))
    found[command] |= set(LONG_OPTION.findall(re.sub(r"`[^`]*`", "", entry)))
    return found


def table_problems(readme: str, parser: argparse.ArgumentParser, left_to_help: dict[str, set[str]]) -> list[str]:
    """What the README's command list and the parser disagree on, one line each; empty when they agree."""
    entries = command_entries(readme)
    commands = subcommands(parser)
    problems = [f"{command}: {n} entries" for command, n in collections.Counter(c for c, _ in entries).items() if n > 1]
    problems += [
        f"{command}: no entry in the README's command list" for command in commands if command not in dict(entries)
    ]
    problems += [f"LEFT_TO_HELP names {command}, which is no subcommand" for command in left_to_help.keys() - commands]
    for command, entry in entries:
        if command not in commands:
            problems.append(f"{command}: a README entry, but no such subcommand")
            continue
        named_here = entry_options(command, entry, commands)
        for owner, names in named_here.items():
            spellings = set().union(*options(commands[owner]))
            problems += [
                f"{command}: the entry names {o}, which {owner} does not take" for o in sorted(names - spellings)
            ]
        in_entry = named_here[command]
        left = left_to_help.get(command, set())
        spellings = set().union(*options(commands[command]))
        problems += [
            f"{command}: LEFT_TO_HELP names {o}, which {command} does not take" for o in sorted(left - spellings)
        ]
        for option in options(commands[command]):
            if not option & (in_entry | left):
                problems.append(f"{command}: {'/'.join(sorted(option))} is neither in its entry nor in LEFT_TO_HELP")
            elif option & in_entry and option & left:
                problems.append(f"{command}: {'/'.join(sorted(option))} is in its entry: drop it from LEFT_TO_HELP")
    section = command_section(readme)
    problems += [
        f"the global option {'/'.join(sorted(option))} is not named in the Command reference section"
        for option in options(parser)
        if not any(named(section, spelling) for spelling in option)
    ]
    return problems


def test_the_readme_command_table_matches_the_parser():
    assert table_problems(README.read_text(), build_parser(), LEFT_TO_HELP) == []


def test_a_subcommand_or_option_without_an_entry_is_caught():
    # the check itself, on a parser that grew a subcommand, a run option and a global option the README lacks
    # (and an option hidden from --help, which needs no entry), and on a README whose artifacts entry names an option
    # artifacts does not take and whose settings entry names one that run does not take
    parser = build_parser()
    subcommands(parser)["run"].add_argument("--turbo", action="store_true", help="a new user-facing option")
    subcommands(parser)["run"].add_argument("--internal", help=argparse.SUPPRESS)
    next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).add_parser("frobnicate")
    parser.add_argument("-q", "--quiet", action="store_true")
    readme = (
        README.read_text()
        .replace("[--artifacts ROOT] [--json]", "[--artifacts ROOT] [--yaml]", 1)
        .replace("every setting `run --set` accepts", "every setting `run --sett` accepts", 1)
    )
    assert "[--yaml]" in readme and "`run --sett`" in readme
    left_to_help = {**LEFT_TO_HELP, "benchmark": {"--similarity"}, "settings": {"--x"}}
    assert sorted(table_problems(readme, parser, left_to_help)) == [
        "artifacts: --json is neither in its entry nor in LEFT_TO_HELP",
        "artifacts: the entry names --yaml, which artifacts does not take",
        "benchmark: --ignore-identical-ids is neither in its entry nor in LEFT_TO_HELP",
        "frobnicate: no entry in the README's command list",
        "run: --turbo is neither in its entry nor in LEFT_TO_HELP",
        "settings: LEFT_TO_HELP names --x, which settings does not take",
        "settings: the entry names --sett, which run does not take",
        "the global option --quiet/-q is not named in the Command reference section",
    ]


def test_no_readme_line_is_wider_than_200_characters():
    # a line that wide scrolls sideways in an editor and in a diff; the command list wraps its entries instead
    wide = [
        f"README.md:{i}: {len(line)}" for i, line in enumerate(README.read_text().splitlines(), 1) if len(line) > 200
    ]
    assert wide == []
