from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import Settings
from crossmodalrag.evals.queries import EvalQuery
from crossmodalrag.evals.retrieval import evaluate
from tests.retrieval.helpers import add_docs, note


def test_eval_reports_overall_and_per_query_with_gate_rates(store, db_path):
    add_docs(store, note("parser", "We rewrote the parser as a tokenizer."), note("cache", "The cache was dropped."))
    queries = [
        EvalQuery("[t] why we rewrote the parser", ["/vault/parser.md"]),
        EvalQuery("[t] dropped cache", ["/vault/cache.md", "/vault/missing.md"]),
        EvalQuery("[t] capital of France", []),
    ]
    report = evaluate(open_retriever(store, Settings(db_path=db_path), top_k=5, lexical_only=True), queries).to_dict()
    overall = report["overall"]
    assert overall["answerable"] == 2 and overall["should_abstain"] == 1
    assert overall["hit_rate"] == 1.0 and overall["recall"] == 0.75
    assert overall["false_answer_rate"] == 0.0 and overall["false_abstain_rate"] == 0.0
    assert report["per_query"][2]["metrics"] is None and report["per_query"][2]["abstained"] is True
