"""The operator's `hitl people` and `hitl groups` commands (docs/right-people.md): name the people behind the
principals, and groups of them, in the deployment's database, as `/api/people` and `/api/groups` do.

A name, principal id or member that cannot be one, or a principal already someone else's, exits 1 saying so,
and nothing is stored.
"""

from __future__ import annotations

import argparse
from typing import Any

from engine import people

from .cli_operator import existing_database
from .settings import load_settings


def add_people_commands(commands: Any) -> None:
    person = commands.add_parser("people", help="the people behind the principals (one person across channels)")
    people_commands = person.add_subparsers(dest="people_command", required=True)
    add = people_commands.add_parser("add", help="name a person and link the principals they use, in order (the "
                                                 "first is where a direct message to them goes first)")
    add.add_argument("name")
    add.add_argument("principals", nargs="+", metavar="principal",
                     help="a principal id: slack:<team>:<user>, twilio:<number>, github:<user id>, an API key's")
    add.add_argument("--display-name", default=None, help="how messages name them (\"Alice Ng\"); their name if none")
    add.add_argument("--replace", action="store_true", help="replace the person of this name and their principals")
    add.set_defaults(handler=cmd_people_add)
    people_commands.add_parser("list", help="every person and their principals").set_defaults(handler=cmd_people_list)
    remove = people_commands.add_parser("remove", help="delete a person: their principals count on their own again")
    remove.add_argument("name")
    remove.set_defaults(handler=cmd_people_remove)

    group = commands.add_parser("groups", help="named groups of people and principals, for approvers(\"group:...\")")
    group_commands = group.add_subparsers(dest="groups_command", required=True)
    add = group_commands.add_parser("add", help="name a group of people (person:<name>) and principal ids")
    add.add_argument("name")
    add.add_argument("members", nargs="*", metavar="member", help="person:<name> of a person, or a principal id")
    add.add_argument("--replace", action="store_true", help="replace the members of the group of this name")
    add.set_defaults(handler=cmd_groups_add)
    group_commands.add_parser("list", help="every group and its members").set_defaults(handler=cmd_groups_list)
    remove = group_commands.add_parser("remove", help="delete a group")
    remove.add_argument("name")
    remove.set_defaults(handler=cmd_groups_remove)


def cmd_people_add(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).write() as db:
        person = people.save_person(db, args.name, args.display_name, args.principals, replace=args.replace)
    print(f"{'replaced' if args.replace else 'added'} {person.name} ({person.display_name}): "
          f"{', '.join(person.principals)}")


def cmd_people_list(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).read() as db:
        everyone = people.people(db)
    print(f"{'PERSON':20} {'DISPLAY NAME':24} PRINCIPALS")
    for person in everyone:
        print(f"{person.name:20} {person.display_name:24} {' '.join(person.principals) or '-'}")


def cmd_people_remove(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).write() as db:
        left = people.delete_person(db, args.name)
    print(f"removed {args.name}" + (f", a member of {', '.join(left)} no more" if left else ""))


def cmd_groups_add(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).write() as db:
        group = people.save_group(db, args.name, args.members, replace=args.replace)
    print(f"{'replaced' if args.replace else 'added'} group {group.name}: {', '.join(group.members) or 'no members'}")


def cmd_groups_list(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).read() as db:
        every = people.groups(db)
    print(f"{'GROUP':20} MEMBERS")
    for group in every:
        print(f"{group.name:20} {' '.join(group.members) or '-'}")


def cmd_groups_remove(args: argparse.Namespace) -> None:
    with existing_database(load_settings()).write() as db:
        people.delete_group(db, args.name)
    print(f"removed group {args.name}")
