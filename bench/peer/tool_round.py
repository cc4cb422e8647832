"""The tool loop of keel's `tool_round` bench, in LangGraph.

A StateGraph over MessagesState: a scripted model node (no network) that asks for one `echo`
tool call per round and answers with final text once R tool results are in the context, and a
ToolNode with one trivial `echo` tool. The graph is compiled with a checkpointer (InMemorySaver,
or SqliteSaver on a fresh temp file) and invoked with durability="sync", so every superstep's
checkpoint is written before the next one starts, as keel commits before it acts.

Method, matched to keel's bench: R = 20 and 200; each (store, R) figure is the median of
REPEATS runs, both R run one after the other per repeat in the same process; a run's time is the
wall time of one `invoke` from the user's message to the final answer (graph build, compile and
store opening are outside it), divided by R.

Prints `langgraph_{memory,sqlite}_ms_per_round_{20,200} = X`.
"""

import os
import sqlite3
import statistics
import sys
import tempfile
import time

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

ROUNDS = (20, 200)
REPEATS = 3


@tool
def echo(q: str) -> str:
    """Echoes its argument."""
    return f"echo: {q}"


def build(rounds, checkpointer):
    def model(state):
        done = sum(1 for m in state["messages"] if isinstance(m, ToolMessage))
        if done < rounds:
            call = {"name": "echo", "args": {"q": f"round {done}"}, "id": f"call-{done}", "type": "tool_call"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=f"done after {done} rounds")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([echo]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


def one_run(store, rounds, run):
    """Wall seconds of one loop of `rounds` rounds on a fresh store."""
    tmp = None
    conn = None
    if store == "memory":
        saver = InMemorySaver()
    else:
        tmp = tempfile.mkdtemp(prefix=f"langgraph-tool-round-{rounds}-{run}-")
        conn = sqlite3.connect(os.path.join(tmp, "checkpoints.sqlite"), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
    app = build(rounds, saver)
    # Two supersteps per round (model, tools) plus the final model step, with room to spare.
    config = {"configurable": {"thread_id": f"bench-{run}"}, "recursion_limit": 2 * rounds + 10}
    started = time.perf_counter()
    result = app.invoke({"messages": [HumanMessage("run the loop")]}, config, durability="sync")
    elapsed = time.perf_counter() - started
    messages = result["messages"]
    tool_results = sum(1 for m in messages if isinstance(m, ToolMessage))
    if tool_results != rounds or messages[-1].content != f"done after {rounds} rounds":
        sys.exit(f"the {store} loop of {rounds} rounds did not complete: {tool_results} tool results, last {messages[-1]!r}")
    if conn is not None:
        conn.close()
        for name in os.listdir(tmp):
            os.remove(os.path.join(tmp, name))
        os.rmdir(tmp)
    return elapsed


def main():
    for store in ("memory", "sqlite"):
        samples = {r: [] for r in ROUNDS}
        for run in range(REPEATS):
            for r in ROUNDS:
                samples[r].append(one_run(store, r, run))
        for r in ROUNDS:
            # Median of an odd number of runs: one of the measured runs, as keel's bench takes.
            per_round_ms = statistics.median(samples[r]) / r * 1e3
            print(f"langgraph_{store}_ms_per_round_{r} = {per_round_ms:.3f}", flush=True)


if __name__ == "__main__":
    main()
