"""tool_search benchmark: prompt tokens saved with 50 tools, and search recall.

A script, not a timed test. It registers 50 realistic tools, runs the same three-call
turn (search, call the found tool, answer) through a kernel with and without the
``tool_search`` filter, and counts the tool-definition tokens each LLM call carries.
Tokens are estimated from the serialized definitions (the OpenAI ``tools`` JSON) at 4
characters per token, the usual rule of thumb for English JSON.

It also reports recall: for 25 natural queries, whether the intended tool is among the
``max_results=5`` names the BM25 and regex backends return.

Run it with::

    .venv/bin/python bench/bench_tool_search.py    # a second or two (--quick is accepted)
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from beamfilter_builtins import BM25ToolIndex, RegexToolIndex, tool_search_filter
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, Tool, ToolCall

CHARS_PER_TOKEN = 4

# (name, description, parameters): 50 tools of a typical assistant back end.
CATALOG: list[tuple[str, str, dict[str, str]]] = [
    ("get_weather", "Current weather conditions and temperature for a city.", {"city": "City name"}),
    ("get_forecast", "Weather forecast for the next days for a city.", {"city": "City name", "days": "Days ahead"}),
    (
        "send_email",
        "Send an e-mail message to one or more recipients.",
        {"to": "Recipients", "subject": "Subject", "body": "Body"},
    ),
    ("read_inbox", "List the newest e-mails in the inbox.", {"limit": "How many messages"}),
    (
        "create_calendar_event",
        "Add an event to the user's calendar.",
        {"title": "Title", "start": "Start time", "end": "End time"},
    ),
    ("list_calendar_events", "List calendar events between two dates.", {"start": "From date", "end": "To date"}),
    ("delete_calendar_event", "Remove an event from the calendar.", {"event_id": "Event id"}),
    (
        "convert_currency",
        "Convert an amount of money between currencies using current exchange rates.",
        {"amount": "Amount", "from_currency": "From", "to_currency": "To"},
    ),
    ("get_stock_price", "Latest share price of a stock ticker.", {"ticker": "Ticker symbol"}),
    ("search_web", "Search the web and return the top results with snippets.", {"query": "Search terms"}),
    ("fetch_url", "Download a web page and return its text.", {"url": "Page address"}),
    ("translate_text", "Translate text into another language.", {"text": "Text", "target_language": "Language code"}),
    ("summarize_text", "Summarize a long text in a few sentences.", {"text": "Text"}),
    ("create_ticket", "Open a support ticket in the help desk.", {"title": "Title", "description": "Details"}),
    (
        "update_ticket",
        "Change the status or assignee of a support ticket.",
        {"ticket_id": "Ticket id", "status": "New status"},
    ),
    ("list_tickets", "List open support tickets.", {"assignee": "Assignee"}),
    ("get_customer", "Look up a customer record by e-mail or id.", {"customer": "E-mail or id"}),
    ("update_customer", "Change fields of a customer record.", {"customer_id": "Id", "fields": "Changes"}),
    ("create_invoice", "Create an invoice for a customer.", {"customer_id": "Id", "amount": "Amount"}),
    ("list_invoices", "List invoices of a customer.", {"customer_id": "Id"}),
    ("refund_payment", "Refund a card payment fully or partly.", {"payment_id": "Payment id", "amount": "Amount"}),
    ("get_order_status", "Shipping and delivery status of an order.", {"order_id": "Order id"}),
    ("cancel_order", "Cancel an order that has not shipped yet.", {"order_id": "Order id"}),
    ("track_package", "Track a parcel by its carrier tracking number.", {"tracking_number": "Number"}),
    ("book_flight", "Book a flight between two airports.", {"origin": "From", "destination": "To", "date": "Date"}),
    (
        "search_flights",
        "Find flights and prices between two airports.",
        {"origin": "From", "destination": "To", "date": "Date"},
    ),
    ("book_hotel", "Reserve a hotel room in a city.", {"city": "City", "check_in": "Date", "nights": "Nights"}),
    (
        "get_directions",
        "Driving, walking or transit directions between two places.",
        {"origin": "From", "destination": "To"},
    ),
    ("find_restaurants", "Find restaurants near a place by cuisine.", {"place": "Where", "cuisine": "Cuisine"}),
    ("set_reminder", "Remind the user of something at a given time.", {"text": "What", "time": "When"}),
    ("create_note", "Save a note in the user's notebook.", {"title": "Title", "text": "Text"}),
    ("search_notes", "Search the user's notes by keywords.", {"query": "Keywords"}),
    ("upload_file", "Upload a file to cloud storage.", {"path": "Local path"}),
    ("list_files", "List files in a cloud storage folder.", {"folder": "Folder"}),
    ("delete_file", "Delete a file from cloud storage.", {"path": "Path"}),
    ("run_sql_query", "Run a read-only SQL query against the analytics database.", {"sql": "Query"}),
    ("create_chart", "Draw a chart from a table of numbers.", {"data": "Table", "kind": "Chart type"}),
    ("get_exchange_holidays", "Public holidays of a country for a year.", {"country": "Country", "year": "Year"}),
    ("get_time_zone", "Current local time and time zone of a city.", {"city": "City"}),
    ("calculate", "Evaluate an arithmetic expression.", {"expression": "Expression"}),
    ("generate_image", "Create an image from a text prompt.", {"prompt": "Description"}),
    ("transcribe_audio", "Turn speech in an audio file into text.", {"path": "Audio file"}),
    ("post_slack_message", "Post a message to a Slack channel.", {"channel": "Channel", "text": "Message"}),
    (
        "create_github_issue",
        "Open an issue in a GitHub repository.",
        {"repo": "owner/name", "title": "Title", "body": "Body"},
    ),
    ("list_pull_requests", "List open pull requests of a GitHub repository.", {"repo": "owner/name"}),
    ("deploy_service", "Deploy a service version to production.", {"service": "Service", "version": "Version"}),
    ("get_server_metrics", "CPU, memory and latency metrics of a server.", {"host": "Host name"}),
    ("restart_server", "Restart a server process.", {"host": "Host name"}),
    ("get_news", "Latest news headlines on a topic.", {"topic": "Topic"}),
    ("lookup_word", "Dictionary definition and synonyms of a word.", {"word": "Word"}),
]

QUERIES: list[tuple[str, str]] = [
    ("weather", "get_weather"),
    ("forecast rain tomorrow", "get_forecast"),
    ("send email", "send_email"),
    ("calendar event meeting", "create_calendar_event"),
    ("currency exchange dollars euros", "convert_currency"),
    ("stock share price", "get_stock_price"),
    ("translate language", "translate_text"),
    ("support ticket", "create_ticket"),
    ("refund payment", "refund_payment"),
    ("order shipping status", "get_order_status"),
    ("track parcel", "track_package"),
    ("flight booking", "book_flight"),
    ("hotel room", "book_hotel"),
    ("directions transit", "get_directions"),
    ("restaurant cuisine", "find_restaurants"),
    ("reminder", "set_reminder"),
    ("notes search", "search_notes"),
    ("upload file storage", "upload_file"),
    ("sql database query", "run_sql_query"),
    ("chart", "create_chart"),
    ("time zone", "get_time_zone"),
    ("speech audio text", "transcribe_audio"),
    ("slack message", "post_slack_message"),
    ("github issue", "create_github_issue"),
    ("server cpu metrics", "get_server_metrics"),
]


def make_tools() -> list[Tool]:
    tools = []
    for name, description, params in CATALOG:
        schema = {
            "type": "object",
            "properties": {key: {"type": "string", "description": text} for key, text in params.items()},
            "required": list(params),
        }
        tools.append(Tool(name, description, schema, fn=lambda **kw: "ok"))
    return tools


def tokens_of(tools: Sequence[Tool]) -> int:
    """Estimated prompt tokens of a ``tools`` list as it is sent to the provider."""
    if not tools:
        return 0
    return len(json.dumps([t.definition for t in tools], ensure_ascii=False)) // CHARS_PER_TOKEN


def script() -> list[ChatResponse | str]:
    return [
        ChatResponse.tool_calls(ToolCall("tool_search", {"query": "weather forecast"}, "s1")),
        ChatResponse.tool_calls(ToolCall("get_weather", {"city": "Oslo"}, "w1")),
        "It is sunny in Oslo.",
    ]


async def run_turn(with_search: bool) -> list[int]:
    tools = make_tools()
    if with_search:
        flt = tool_search_filter()
        model = ScriptedModel(script())
        kernel = Kernel(model, tools=[*tools, *flt.tools], filters=[flt])
    else:
        model = ScriptedModel(script()[1:])
        kernel = Kernel(model, tools=tools)
    result = await kernel.run("What's the weather in Oslo?")
    if result.text != "It is sunny in Oslo.":
        raise RuntimeError(f"unexpected answer {result.text!r}")
    return [tokens_of(request.tools) for request in model.requests]


def recall(index_name: str, index: BM25ToolIndex | RegexToolIndex) -> tuple[int, int]:
    index.build(make_tools())
    hits = sum(1 for query, wanted in QUERIES if wanted in index.search(query, 5))
    return hits, len(QUERIES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="accepted for run_all; the run is already short")
    parser.parse_args()
    tools = make_tools()
    everything = tokens_of(tools)
    print(f"{len(tools)} tools; all definitions ≈ {everything:,} tokens (JSON chars / {CHARS_PER_TOKEN})")
    plain = asyncio.run(run_turn(False))
    searched = asyncio.run(run_turn(True))
    print("\nper LLM call, tool-definition tokens:")
    print(f"  without tool_search (2 calls): {plain}")
    print(f"  with tool_search    (3 calls): {searched}  (search; after finding; answer)")
    total_plain, total_searched = sum(plain), sum(searched)
    print(f"\nturn total: {total_plain:,} → {total_searched:,} tokens", end="")
    print(f"  ({100 * (total_plain - total_searched) / total_plain:.0f}% fewer, one extra LLM call)")
    per_call = everything - max(searched)
    print(
        f"per call once tools are found: {everything:,} → {max(searched):,} ({100 * per_call / everything:.0f}% fewer)"
    )
    print("\nrecall@5 over natural queries:")
    for name, index in (("bm25", BM25ToolIndex()), ("regex", RegexToolIndex())):
        hits, total = recall(name, index)
        print(f"  {name:5}: {hits}/{total}")


if __name__ == "__main__":
    main()
