"""The model as a judge, with scripted margins: the gate, sentence checks, short answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossmodalrag.answer.attribution import content_words, excerpts_holding_missing_words, specific_words
from crossmodalrag.answer.citations import sentences
from crossmodalrag.answer.echo import restates_question
from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.answer.forms import is_statement, query_form
from crossmodalrag.answer.parts import short_answer, split_answer
from crossmodalrag.answer.premise import presupposes, unmentioned_words
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.answer.verify import REPLY_MARGIN, judge
from crossmodalrag.cli.render import why_line
from crossmodalrag.config import Settings
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.ingest import ingest_notes
from tests.conftest import write_note
from tests.fakes import ScriptedLLM

QUESTION = "Why did I rewrite the tokenizer?"
ANSWER = "Answer: regexes backtracked [E1]\nThe old regexes backtracked for minutes [E1]. Tests got faster [E2]."


def notes_retriever(store, settings: Settings, vault: Path, notes: dict[str, str]):
    """A lexical retriever over a vault of these notes (file name -> markdown)."""
    for name, text in notes.items():
        write_note(vault, name, text)
    ingest_notes(store, [vault])
    return open_retriever(store, settings, lexical_only=True)


def evidence_ids(retriever, question: str) -> dict[str, str]:
    """Each piece of evidence's title -> its [E#] id, as the question's answer numbers them."""
    return {e.hit.title: e.id for e in ask_without_llm(retriever, question).evidence}


@pytest.fixture
def retriever(store, settings: Settings, tmp_path: Path):
    return notes_retriever(
        store,
        settings,
        tmp_path / "vault",
        {
            "tokenizer.md": "# Tokenizer rewrite\n\nI rewrote the tokenizer because regexes backtracked.\n",
            "tests.md": "# Tokenizer tests\n\nAfter the tokenizer rewrite the tests got faster.\n",
        },
    )


def test_split_answer_separates_the_short_answer_line_and_keeps_citations_with_their_sentence():
    assert split_answer(ANSWER) == [
        ("Answer: regexes backtracked [E1]", True),
        ("The old regexes backtracked for minutes [E1].", False),
        ("Tests got faster [E2].", False),
    ]
    assert split_answer("It was slow. [E1] It hung [E2].") == [("It was slow. [E1]", False), ("It hung [E2].", False)]


@pytest.mark.parametrize(
    "text, expected",
    [
        (ANSWER, "regexes backtracked"),
        ("**Answer:** 7 May 2023 [E2].\nShe went the day before [E2].", "7 May 2023"),
        ("She went on 7 May 2023 [E1]. It helped [E1].", "She went on 7 May 2023"),
        ("Answer: Lots of homes were ruined. It was a serious challenge [E1]", "Lots of homes were ruined"),
        ("Answer: Dr. Patel at St. Mary's. He came twice [E1]", "Dr. Patel at St. Mary's"),
        ("Answer: March 2023 [E3], May 2023 [E5]", "March 2023, May 2023"),
        ("Answer: Yes, [E3] and [E4]", "Yes"),  # not "Yes, and"
        ("Answer: pottery and hiking [E1] and [E3]", "pottery and hiking"),
        ("Answer: Yes [E1], [E2]", "Yes"),
        ("Answer: rock and roll [E1]", "rock and roll"),
        ("**Answer:** €55,000 [E1]", "€55,000"),  # a sign is part of the answer
        ("Answer: ~700 MB [E1]", "~700 MB"),
        ("The Answer: We dropped the cache. It was slow [E1]", "We dropped the cache"),
        ("", None),
    ],
)
def test_short_answer(text, expected):
    assert short_answer(text) == expected


@pytest.mark.parametrize(
    "question, line, expected",
    [
        (
            "When did Caroline apply to adoption agencies?",
            "Caroline applied to adoption agencies on 7 May 2023",
            "7 May 2023",
        ),
        ("What does Nate rely on for cheer and joy?", "Nate relies on his turtles for cheer and joy", "his turtles"),
        ("What kind of fiction stories does Tim write?", "Tim writes fantasy stories", "fantasy stories"),
        (
            "Is Melanie part of the LGBTQ community?",
            "No, Melanie is not part of the community",
            "No, Melanie is not part of the community",
        ),
        ("Which toy does Nate share?", "Iron Man", "Iron Man"),
        ("What reminds John to lead?", "John's painting reminds him", "painting reminds him"),
        (
            "Why did Nate choose the hair color he did?",
            "Nate chose the hair color he did because it was bold",
            "bold",
        ),
        ("Why did Nate choose red?", "Nate chose red because it's bold", "bold"),
        ("What are Nate's favorite desserts?", "Nate's favorite desserts include coconut ice", "coconut ice"),
        ("What does Nate keep?", "Nate keeps it safe", "it safe"),  # a pronoun without a copula stays
        ("What did Joanna make for Nate?", "Joanna made caramel ice cream for Nate", "caramel ice cream"),
        ("What pets does Nate have?", "Nate has a dog and three turtles", "a dog and three turtles"),
        ("What did Nate take to the beach?", "Nate took his turtles to the beach yesterday", "his turtles"),
        ("When did Nate go to the beach?", "Nate went to the beach yesterday", "yesterday"),
        ("Did Nate share the toy?", "Nate shared the toy", "Nate shared the toy"),  # nothing new: kept whole
        ("¿Cuándo publicaron el informe?", "Publicaron el informe en marzo de 2020", "en marzo de 2020"),
        # mem ask on FinanceBench with qwen2.5-coder-1.5b: "of 2023" was cut as the question's "2023"
        (
            "Which segment of JnJ is a discontinued operation from August 30, 2023 onward?",
            "Consumer Health results, including a gain in the third quarter of 2023",
            "Consumer Health results, including a gain in the third quarter of 2023",
        ),
    ],
)
def test_the_short_answer_drops_what_only_restates_the_question(question, line, expected):
    assert short_answer(f"Answer: {line} [E1]", question) == expected


@pytest.mark.parametrize(
    "text",
    [
        "WER übernimmt das System von Frau Schröder? [E1] Answer: Herrn Özdemir [E1] Er beginnt im Mai [E1].",
        "Wer übernimmt das System von Frau Schröder?\n**Answer:** Herrn Özdemir [E1]\nEr beginnt im Mai [E1].",
    ],
)
def test_the_question_repeated_before_the_answer_label_is_no_part_of_the_answer(text):
    # qwen2.5-coder-1.5b in German: short_answer was the question, judged a supported claim.
    question = "Wer übernimmt das System von Frau Schröder?"
    assert short_answer(text, question) == "Herrn Özdemir"
    assert [short for _, short in split_answer(text)] == [True, False]
    assert split_answer("Was it slow? Answer is: yes [E1]")[0] == ("Was it slow?", False)  # no label: kept
    assert split_answer("It was slow. Why? Answer: regexes [E1]")[0] == ("It was slow.", False)  # not all asked


def test_a_repeated_question_is_neither_judged_nor_shown(retriever, settings: Settings):
    text = f"{QUESTION} [E1] {ANSWER}"
    llm = ScriptedLLM(text, margins=[2.0, 3.0, 1.5, 0.5])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text == ANSWER and answer.short_answer == "regexes backtracked"
    assert len(llm.judged) == 4  # the gate and the three sentences of ANSWER


def test_all_supported_keeps_the_answer_and_reports_every_margin(retriever, settings: Settings):
    llm = ScriptedLLM(ANSWER, margins=[2.0, 3.0, 1.5, 0.5])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert not answer.abstained and answer.text == ANSWER
    assert answer.short_answer == "regexes backtracked"
    checks = answer.to_dict()["verification"]
    assert checks["gate_margin"] == 2.0
    assert [c["margin"] for c in checks["claims"]] == [3.0, 1.5, 0.5]
    assert [c["cited"] for c in checks["claims"]] == [["E1"], ["E1"], ["E2"]]
    assert "gate_seconds" in answer.timing and "verification_seconds" in answer.timing
    # Each check asks about its own sentence and names the excerpts that sentence cites.
    last = llm.judged[-1][-1]["content"]
    assert "[E2]" in last and "[E1]" not in last and "Claim: Tests got faster" in last


def test_an_unsupported_sentence_is_dropped_and_flagged(retriever, settings: Settings):
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(ANSWER, margins=[2.0, 3.0, 1.5, -4.0]))
    assert not answer.abstained
    assert answer.text == "Answer: regexes backtracked [E1]\nThe old regexes backtracked for minutes [E1]."
    assert [c["id"] for c in answer.citations] == ["E1"]  # E2 was cited only by the dropped sentence
    assert [w["kind"] for w in answer.citation_warnings] == ["unsupported_claim"]


def test_a_stray_full_stop_on_its_own_line_is_no_sentence_to_judge_or_cite(retriever, settings: Settings):
    """QA: "Marco left the team ... Lisbon. [E1]" then "." alone on a line: judged (a check spent on
    nothing), cited, and shown as "Lisbon. [E1]. [E1]"."""
    assert split_answer("Answer: regexes [E1]\nThey backtracked. [E1]\n.") == [
        ("Answer: regexes [E1]", True),
        ("They backtracked. [E1]", False),
    ]
    llm = ScriptedLLM("Answer: regexes backtracked [E1]\nSupport:\nThey took minutes on long lines. [E1]\n.")
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text == "Answer: regexes backtracked [E1]\nThey took minutes on long lines. [E1]"
    assert len(answer.verification["claims"]) == 2


@pytest.mark.parametrize("second", [1.0, -2.0])
def test_a_sentence_failing_its_citations_is_judged_again_beside_the_excerpts_holding_its_other_words(
    retriever, settings: Settings, second: float
):
    """A multi-hop answer cited one of the two excerpts it combines: judged again with the excerpt that
    holds the words its citation lacks, it passes and cites that one too, or fails as before."""
    llm = ScriptedLLM("Answer: regexes backtracked and tests got faster [E1]", margins=[2.0, -3.0, second])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert len(llm.judged) == 3  # the gate, the check, the second look
    assert "[E1]" in llm.judged[-1][-1]["content"] and "[E2]" in llm.judged[-1][-1]["content"]
    claim = answer.verification["claims"][0]
    if second > 0:
        assert not answer.abstained and answer.text == "Answer: regexes backtracked and tests got faster [E1][E2]"
        assert claim["margin"] == 1.0 and claim["added_citations"] == ["E2"]
        assert [c["id"] for c in answer.citations] == ["E1", "E2"]
    else:
        assert answer.abstained and answer.abstention_reason == "unsupported"
        assert claim["margin"] == -3.0 and claim["added_citations"] == []


def test_a_second_look_adds_only_excerpts_holding_the_sentences_own_words(store, settings: Settings, tmp_path):
    """QA: "Fly.io is the hosting platform used for Helios." (citing nothing) failed against its
    closest excerpt, passed beside every note naming Helios, and cited all five, an office move among
    them. The question's words are in every retrieved excerpt: only the sentence's own words pick
    what it is judged beside, and the guessed closest excerpt is cited only if it holds some of them."""
    notes = {
        "api.md": "# Helios API design\n\nWherever it is hosted, the API is REST.\n",
        "hosting.md": "# Moving off Heroku\n\nHeroku's price increase made us move Helios to Fly.io.\n",
        "office.md": "# Office\n\nThe Helios team moves to a new office in March.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Where is Helios hosted?"
    ids = evidence_ids(retriever, question)
    api, hosting = ids["Helios API design"], ids["Moving off Heroku"]
    text = f"Answer: Fly.io [{api}]\nFly.io is the hosting platform used for Helios."
    llm = ScriptedLLM(text, margins=[3.0, 3.0, -3.0, 1.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    claim = answer.to_dict()["verification"]["claims"][1]
    assert claim["added_citations"] == [hosting] and ids["Office"] not in claim["judged"]
    assert answer.text.endswith(f"Fly.io is the hosting platform used for Helios. [{hosting}]")


def test_a_failed_sentence_whose_words_its_citations_hold_is_not_judged_again(retriever, settings: Settings):
    llm = ScriptedLLM("Answer: regexes backtracked [E1]", margins=[2.0, -3.0])
    assert ask_with_llm(retriever, QUESTION, settings, llm=llm).abstained
    assert len(llm.judged) == 2


def test_an_unsupported_short_answer_abstains_as_unsupported(retriever, settings: Settings):
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(ANSWER, margins=[2.0, -3.0, 1.5, 1.0]))
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.citations == [] and answer.short_answer is None
    assert answer.evidence  # what was retrieved is still shown
    assert answer.to_dict()["verification"]["claims"][0]["supported"] is False


def test_the_gate_abstains_before_any_text_is_generated(retriever, settings: Settings):
    llm = ScriptedLLM(ANSWER, margins=[-2.0])
    streamed: list[str] = []
    answer = ask_with_llm(retriever, QUESTION, settings, streamed.append, llm=llm)
    assert answer.abstained and answer.abstention_reason == "llm_insufficient"
    assert llm.calls == [] and streamed == []
    gate = {"gate_margin": -2.0, "gate_evidence": "E1", "gate_min_margin": settings.abstain_min_margin}
    assert answer.to_dict()["verification"] == gate


def test_thresholds_are_settings(retriever, settings: Settings):
    settings.abstain_min_margin = -3.0
    settings.verify_min_margin = -5.0
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(ANSWER, margins=[-2.0, -4.0, -4.0, -4.0]))
    assert not answer.abstained and answer.text == ANSWER


def test_verification_off_asks_the_judge_nothing(retriever, settings: Settings):
    settings.llm_verify = False
    llm = ScriptedLLM(ANSWER, margins=[-9.0] * 4)
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert not answer.abstained and llm.judged == [] and answer.verification is None
    assert answer.short_answer == "regexes backtracked"


def test_a_statement_of_what_the_evidence_lacks_is_kept_unchecked(retriever, settings: Settings):
    text = "Answer: regexes backtracked [E1]\nThe evidence does not say when this happened."
    llm = ScriptedLLM(text, margins=[2.0, 2.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text == text and len(llm.judged) == 2  # the gate and the short answer only


def test_a_hedge_denying_what_the_short_answer_answers_is_left_out(retriever, settings: Settings):
    question = "What did the regexes do before I rewrote the tokenizer?"
    text = "Answer: regexes backtracked [E1]\nNo excerpt states what the regexes did before I rewrote the tokenizer."
    answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0]))
    assert answer.text == "Answer: regexes backtracked [E1]" and not answer.abstained
    assert [c["reason"] for c in answer.to_dict()["verification"]["claims"]] == [None, "hedge"]
    failed = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text, margins=[2.0, -5.0]))
    assert failed.abstained  # no short answer passed: nothing to contradict, the hedge is no answer


def test_a_hedge_saying_the_reason_is_not_stated_stays_after_an_answer_to_why(retriever, settings: Settings):
    """ "Why did we move Kestrel to PostgreSQL?" was answered "because Jonas Weber proposed it" (the
    judge passed it: the note says he proposed it), and the model's own "No excerpt directly states
    the reason for moving Kestrel to PostgreSQL." was left out: the user read a proposal as the
    reason. The judge checks what an excerpt says, not that it is the reason: the doubt stays."""
    for hedge in ("No excerpt directly states why I rewrote the tokenizer.", "No excerpt states the reason for it."):
        text = f"Answer: regexes backtracked [E1]\n{hedge}"
        answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0]))
        assert answer.text == text and not answer.abstained


def test_a_hedge_naming_a_longer_form_of_the_questions_words_is_left_out():
    """ "No excerpt directly states the monthly cost of Helios." after "Answer: 29 euros per month [E1]"
    stayed: of the question's words it named only helios and cost, not "month" in "monthly"."""
    from crossmodalrag.answer.hedges import named_in

    asked = content_words("How much does Helios cost per month?")
    hedge = content_words("No excerpt directly states the monthly cost of Helios.")
    assert named_in(asked, hedge) == {"helios", "cost", "month"}
    assert named_in({"cat"}, {"category"}) == set(), "a short word is no prefix of a longer one"


class WordJudge:
    """A backend without logits: it can only answer in words."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def stream(self, messages, generation):
        assert generation.max_tokens <= 3
        yield self.reply


@pytest.mark.parametrize("reply, margin", [("Yes.", REPLY_MARGIN), ("no", -REPLY_MARGIN), ("Maybe", 0.0)])
def test_backends_without_logits_are_judged_by_their_one_word_reply(reply, margin):
    assert judge(WordJudge(reply), [[{"role": "user", "content": "?"}]]) == [margin]


def test_generation_stops_after_the_short_answer_and_three_sentences(retriever, settings: Settings):
    rambling = ANSWER + " It took minutes [E1]. Nobody liked it [E1]. The end came [E2]. Then more [E2]."
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(rambling))
    assert answer.text == (
        "Answer: regexes backtracked [E1]\nThe old regexes backtracked for minutes [E1]. "
        "Tests got faster [E2]. It took minutes [E1]."
    )
    assert len(answer.verification["claims"]) == 4


def test_a_sentence_citing_only_another_persons_words_fails_without_the_judge(store, settings: Settings, tmp_path):
    vault = tmp_path / "chat"
    write_note(vault, "race.md", "# Charity race\n\nMelanie: after the charity race I realized self-care matters.\n")
    write_note(vault, "team.md", "# Team\n\nCaroline joined in May.\n")  # known to memory, not to the race note
    ingest_notes(store, [vault])
    retriever = open_retriever(store, settings, lexical_only=True)
    question = "What did Caroline realize after the charity race?"
    llm = ScriptedLLM("Answer: self-care matters [E1]\nShe said so after the race [E1].", margins=[3.0, 3.0, 3.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    claims = answer.to_dict()["verification"]["claims"]
    assert [(c["reason"], c["margin"]) for c in claims] == [("names_missing", None)] * 2
    assert answer.text.startswith("No answer: the evidence the language model's answer rests on is not about Caroline")
    # The same answer to the question about the person who said it stands.
    answer = ask_with_llm(retriever, question.replace("Caroline", "Melanie"), settings, llm=llm)
    assert not answer.abstained and answer.short_answer == "self-care matters"


def test_a_short_answer_citing_the_wrong_document_is_judged_against_the_one_about_the_named_thing(
    store, settings: Settings, tmp_path
):
    notes = {
        "planning.md": "# Release planning\n\nPython 3.9 is the minimum; 3.13 gets added to CI.\n",
        "release.md": "# Release 1.0\n\nThe quillmark version went from 0.1 to 1.0 for the release.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Which Python version is the minimum for the quillmark release?"
    evidence_of = evidence_ids(retriever, question)
    wrong, right = evidence_of["Release 1.0"], evidence_of["Release planning"]
    llm = ScriptedLLM(f"Answer: 3.9 [{wrong}]", margins=[3.0, 3.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    (claim,) = answer.to_dict()["verification"]["claims"]
    assert not answer.abstained and answer.short_answer == "3.9"
    assert claim["attributed_to"] == right and claim["judged"] == [right]
    llm = ScriptedLLM(f"Answer: 4.2 [{wrong}]", margins=[3.0, 3.0])  # held by no document about Python
    assert ask_with_llm(retriever, question, settings, llm=llm).abstention_reason == "unsupported"


def test_a_note_named_after_what_the_question_names_is_about_it(store, settings: Settings, tmp_path):
    """QA: "How much does Helios cost per month?" was withheld (`names_missing`) though the model
    answered from work/...-helios-pricing.md, which never repeats the project's name."""
    notes = {
        "work/2025-01-20-helios-pricing.md": "# Pricing decision\n\nWe settled on 29 euros per month per bakery.\n",
        "work/2024-01-15-kickoff.md": "# Kickoff\n\nHelios is our new invoicing service for bakeries.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "How much does Helios cost per month?"
    pricing = evidence_ids(retriever, question)["Pricing decision"]
    llm = ScriptedLLM(f"Answer: 29 euros per month [{pricing}]", margins=[3.0, 3.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    (claim,) = answer.to_dict()["verification"]["claims"]
    assert not answer.abstained and answer.short_answer == "29 euros per month"
    assert claim["judged"] == [pricing] and claim["reason"] is None


def chat_retriever(
    store,
    settings: Settings,
    tmp_path: Path,
    lines: list[tuple[str, str]],
    sessions: int = 1,
    day: str = "{} October, 2022",
):
    """A Nate-and-Joanna conversation ingested as `mem ingest-chat` would, and a lexical retriever;
    with `sessions`, the lines dealt out over that many sessions (one source each), session n
    dated `day.format(n)`."""
    conversation = {"speaker_a": "Nate", "speaker_b": "Joanna"}
    for session in range(1, sessions + 1):
        conversation[f"session_{session}_date_time"] = day.format(session)
        conversation[f"session_{session}"] = [
            {"speaker": who, "dia_id": f"D{session}:{n}", "text": text}
            for n, (who, text) in enumerate(lines[session - 1 :: sessions], 1)
        ]
    export = tmp_path / "locomo.json"
    sample = {"sample_id": "x", "conversation": conversation, "qa": []}
    export.write_text(json.dumps([sample]), encoding="utf-8")
    ingest_conversations(store, [export])
    return open_retriever(store, settings, lexical_only=True)


def test_in_an_ingested_chat_only_the_named_persons_own_turns_answer_about_them(store, settings: Settings, tmp_path):
    """The session title ("Nate & Joanna · ...") and each turn's breadcrumb name both people: only
    who spoke a turn tells whose words it holds (LoCoMo's adversarial questions swap the person)."""
    lines = [
        ("Nate", "How was your weekend?"),
        ("Joanna", "I made caramel ice cream and it was delicious!"),
        ("Nate", "My turtles love the new tank."),
    ]
    retriever = chat_retriever(store, settings, tmp_path, lines)
    settings.abstain_min_subject_share = 0.0  # every turn of a 3-turn chat matches through its title: the
    # subject share (tested apart) would count them all; this test is about the sentence check
    llm = ScriptedLLM("Answer: it was delicious [E1]", margins=[3.0, 3.0])
    question = "What did {} think of the caramel ice cream?"
    answer = ask_with_llm(retriever, question.format("Nate"), settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.to_dict()["verification"]["claims"][0]["reason"] == "names_missing"
    assert not ask_with_llm(retriever, question.format("Joanna"), settings, llm=llm).abstained


def test_a_claim_is_judged_only_against_the_cited_turns_of_the_person_asked_about(store, settings: Settings, tmp_path):
    lines = [("Nate", "I love ice cream weekends."), ("Joanna", "I made caramel ice cream and it was delicious!")]
    retriever = chat_retriever(store, settings, tmp_path, lines)
    llm = ScriptedLLM("Answer: weekend ice cream [E1][E2]", margins=[3.0, 3.0])
    answer = ask_with_llm(retriever, "What ice cream did Nate make?", settings, llm=llm)
    judged = [m[-1]["content"].split("Claim:")[0] for m in llm.judged if "Claim:" in m[-1]["content"]]
    assert judged and "I made caramel" not in judged[0]  # Joanna's turn is not evidence about Nate
    assert "I love ice cream weekends" in judged[0] and not answer.abstained


def test_the_gate_judges_the_named_persons_own_turn_not_the_best_hit(store, settings: Settings, tmp_path):
    lines = [("Nate", "Nice, I bought ice cream."), ("Joanna", "I made caramel ice cream, rich and creamy!")]
    retriever = chat_retriever(store, settings, tmp_path, lines)
    llm = ScriptedLLM("Answer: rich and creamy [E1]", margins=[-3.0])
    question = "What did Nate think of the caramel ice cream he made?"
    assert retriever.search(question).hits[0].text.endswith("rich and creamy!")  # Joanna's words rank first
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    question_asked = llm.judged[0][-1]["content"].rsplit("\n\n", 1)[1]  # inside the answer prompt
    assert "[E2]" in question_asked and "[E1]" not in question_asked
    assert answer.abstained and answer.verification["gate_evidence"] == "E2"


def test_a_line_of_only_citations_belongs_to_the_sentence_before_it():
    assert split_answer("Answer: a dog [E1].\nSupport: [E3]\nShe adopted him [E2].") == [
        ("Answer: a dog [E1]. [E3]", True),
        ("She adopted him [E2].", False),
    ]
    assert split_answer("Answer: yes\n[E1][E2]") == [("Answer: yes [E1][E2]", True)]


def test_support_sentences_lose_the_list_markers_and_labels_that_open_them():
    text = "Answer: 15 July [E1]\n- She went then. [E1] - The photo shows kids.\nExplanation: It was hot [E2]\n"
    text += ": None say where.\n2. Done"
    assert [sentence for sentence, _ in split_answer(text)[1:]] == [
        "She went then. [E1]",
        "The photo shows kids.",
        "It was hot [E2]",
        "None say where.",
        "Done",
    ]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("Bright and bold! He wanted to stand out", "Bright and bold!"),
        ("Yes. She loves classical music", "Yes."),
        ("J. R. R. Tolkien wrote it. Then more", "J. R. R. Tolkien wrote it."),
        ("It cost 3.5 dollars in the U.S. Army store", "It cost 3.5 dollars in the U.S. Army store"),
        ("Am 12. Dezember 2023 war sie dort. Dann ging sie", "Am 12. Dezember 2023 war sie dort."),
        ("It took 3. Then more came", "It took 3."),
        ("It failed at night (i.e. 02:30 UTC) on one leg. Then", "It failed at night (i.e. 02:30 UTC) on one leg."),
        ("Tools, e.g. Ruff, help. Fine", "Tools, e.g. Ruff, help."),
    ],
)
def test_first_sentence_stops_at_a_sentence_end_not_at_a_title_or_initial(line, expected):
    assert sentences(line)[0] == expected


def test_the_answer_line_gives_its_first_sentence_as_the_short_answer_and_the_rest_as_support():
    text = "Answer: Tilly helps her focus. It brings her joy [E1]. She was a gift. [E2]\n- She sleeps with it [E1]."
    assert split_answer(text) == [
        ("Answer: Tilly helps her focus.", True),
        ("It brings her joy [E1].", False),
        ("She was a gift. [E2]", False),
        ("She sleeps with it [E1].", False),  # judged and kept without its list marker
    ]
    assert split_answer("**Answer:**\nDr. Patel. He came twice [E1]")[0] == ("**Answer:** Dr. Patel.", True)
    assert split_answer("Answer: [E1] Yes") == [("Answer: [E1] Yes", True)]
    assert short_answer("Answer: 12. Dezember 2023 [E1]") == "12. Dezember 2023"  # not "12"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("- [E3] Today I went to the park. [E4] It rained.", ["- [E3] Today I went to the park. [E4]", "It rained."]),
        ("She went. [E2] - [E5] Then she left.", ["She went. [E2]", "- [E5] Then she left."]),
        ("It hung [E2]. [E3]", ["It hung [E2]. [E3]"]),
        ("- She camped [E1]. - He camped [E2]. - [E3]", ["- She camped [E1].", "- He camped [E2]. - [E3]"]),
    ],
)
def test_a_piece_without_words_joins_the_sentence_after_it(line, expected):
    assert sentences(line) == expected


def test_each_sentence_of_the_answer_line_after_the_first_is_judged_as_support(retriever, settings: Settings):
    text = "Answer: regexes backtracked. The tests ran on a Tuesday [E2].\n- [E1] The old regexes backtracked a lot."
    llm = ScriptedLLM(text, margins=[2.0, 2.0, -3.0, 2.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    claims = answer.verification["claims"]
    assert [(c["short_answer"], c["cited"], c["supported"]) for c in claims] == [
        (True, [], True),
        (False, ["E2"], False),  # an invented second sentence on the answer line is dropped on its own
        (False, ["E1"], True),  # a bullet opening with its citation is one cited sentence
    ]
    assert "Claim: The tests ran on a Tuesday" in llm.judged[2][-1]["content"]
    assert not answer.abstained and answer.short_answer == "regexes backtracked"
    # the short answer cites what it was judged by, of the excerpts kept sentences cite (not E2)
    assert answer.text == "Answer: regexes backtracked. [E1]\n[E1] The old regexes backtracked a lot."
    assert [w["kind"] for w in answer.citation_warnings] == ["unsupported_claim"]  # no "uncited claim"


def test_a_short_answer_left_as_the_only_sentence_names_the_excerpts_it_was_judged_against(
    retriever, settings: Settings
):
    text = "Answer: regexes backtracked. The tests ran on a Tuesday [E2]."
    llm = ScriptedLLM(text, margins=[2.0, 2.0, -3.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert [c["supported"] for c in answer.verification["claims"]] == [True, False]
    assert answer.text == "Answer: regexes backtracked. [E2]"  # not delivered without any source
    assert [w["kind"] for w in answer.citation_warnings] == ["unsupported_claim"]
    assert answer.citations and answer.short_answer == "regexes backtracked"


def test_an_answer_line_of_uncited_sentences_is_not_cut_before_its_first_citation(retriever, settings: Settings):
    run_on = "Answer: regexes backtracked. They were slow. Lines hung. It was bad."
    llm = ScriptedLLM(f"{run_on}\n- [E1] The old regexes backtracked a lot. More text. And more.")
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text.endswith("The old regexes backtracked a lot. [E1]")  # stopped after the citation
    assert answer.citations and "no_citations" not in [w["kind"] for w in answer.citation_warnings]
    uncited = ScriptedLLM(f"{run_on} Five. Six. Seven [E1].")
    assert "Seven" not in ask_with_llm(retriever, QUESTION, settings, llm=uncited).text  # at most what is checked


def test_a_short_answer_never_names_an_excerpt_the_model_did_not_cite(retriever, settings: Settings):
    llm = ScriptedLLM("Answer: regexes backtracked. The tests ran on a Tuesday.", margins=[2.0, 2.0, -3.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text == "Answer: regexes backtracked."


@pytest.mark.parametrize(
    "query, statement",
    [
        ("0-dimensional biomaterials show inductive properties.", True),
        ("Vitamin D lowers blood pressure", True),
        ("When did Caroline go to the support group?", False),
        ("what did I change in May", False),
        ("tell me about the tokenizer rewrite", False),
        ("tokenizer rewrite", False),  # a few keywords: neither, asked as a question
        ("¿Cuándo publicaron el informe", False),
        # other languages' questions, with a full-width mark, a question word, or neither (from the
        # multilingual sets: each was taken for a claim and put to the model as "Is this true: ...?")
        ("艾蒂安·保罗·马利·拉莫特的出生地是哪里？", False),
        ("江淮（長江流域・淮河流域）とはどこの国にあるでしょうか", False),
        ("監視活動 (Observer Mission) の任務は", False),
        ("Wer führte Regie bei dem Film", False),
        ("Nombre una forma en la que la organización cerró temporalmente la base.", False),
        ("Bá tước của Melfi là ai", False),
        ("Vitamin D senkt den Blutdruck.", True),
        ("ビタミンDは血圧を下げる。", False),  # one run of letters: too few words to count as a claim
        ("Marco Bellini vs Marta Bellucci on the mobile release", False),  # a comparison asks how they differ
    ],
)
def test_is_statement(query, statement):
    assert is_statement(query) is statement


@pytest.mark.parametrize(
    "query, form",
    [
        ("Would Melanie likely enjoy the song 'The Four Seasons' by Vivaldi?", "conjecture"),
        ("What job might Maria pursue in the future?", "conjecture"),
        ("Based on Tim's collections, what is a shop that he would enjoy visiting?", "conjecture"),
        ("What game was the second tournament that Nate won based on?", "question"),  # "based on" mid-question
        ("When did Caroline go to the support group?", "question"),
        ("Vitamin D lowers blood pressure", "statement"),
    ],
)
def test_query_form(query, form):
    assert query_form(query) == form


def test_a_conjecture_is_gated_by_its_own_threshold(retriever, settings: Settings):
    settings.abstain_min_margin, settings.abstain_min_margin_conjectures = -1.0, -3.0
    guess = "Would I rewrite the parser with regexes again?"
    answer = ask_with_llm(retriever, guess, settings, llm=ScriptedLLM(ANSWER, margins=[-2.0]))
    assert answer.verification["gate_min_margin"] == -3.0 and answer.abstention_reason != "llm_insufficient"


def test_a_statement_is_gated_by_its_own_threshold(retriever, settings: Settings):
    settings.abstain_min_margin, settings.abstain_min_margin_statements = -1.0, -3.0
    claim = "I rewrote the tokenizer because regexes backtracked."
    answer = ask_with_llm(retriever, claim, settings, llm=ScriptedLLM(ANSWER, margins=[-2.0]))
    assert not answer.abstained and answer.verification["gate_min_margin"] == -3.0
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(ANSWER, margins=[-2.0]))
    assert answer.abstained and answer.verification["gate_min_margin"] == -1.0


def test_a_support_sentence_citing_nothing_is_judged_against_its_closest_excerpt_only(retriever, settings: Settings):
    """Judged against every excerpt the answer cites, a made-up sentence found support in any of them."""
    text = "Answer: regexes backtracked [E1][E2]\nThe old regexes backtracked for minutes."
    llm = ScriptedLLM(text, margins=[2.0, 2.0, 2.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    evidence = {item.id: item.hit.text for item in answer.evidence}
    closest = next(i for i, body in evidence.items() if "regexes backtracked" in body)
    other = next(i for i in evidence if i != closest)
    judged = llm.judged[-1][-1]["content"]
    assert "Claim: The old regexes backtracked" in judged
    assert f"[{closest}]" in judged and f"[{other}]" not in judged


@pytest.fixture
def garden_and_trip(store, settings: Settings, tmp_path: Path):
    return notes_retriever(
        store,
        settings,
        tmp_path / "vault",
        {
            "garden.md": "# Garden\n\nThe tomatoes ripened early this year after the warm spring rain.\n",
            "trip.md": "# Lisbon trip\n\nWe flew to Lisbon in May and stayed by the river for a week.\n",
        },
    )


def _ids(answer) -> dict[str, str]:
    return {item.hit.title: item.id for item in answer.evidence}


def test_a_sentence_copied_from_one_excerpt_but_citing_another_is_judged_and_cited_by_its_source(
    garden_and_trip, settings: Settings
):
    """Small models copy a sentence from one excerpt and cite the last they read: the sentence is judged
    against the excerpt holding its words, and cites that one, not the one the model named."""
    question = "What about the tomatoes and the river trip?"
    ids = _ids(ask_without_llm(garden_and_trip, question))
    garden, trip = ids["Garden"], ids["Lisbon trip"]
    text = f"Answer: they ripened early [{garden}]\nThe tomatoes ripened early after the warm spring rain [{trip}]."
    llm = ScriptedLLM(text, margins=[2.0, 2.0, 2.0])
    answer = ask_with_llm(garden_and_trip, question, settings, llm=llm)
    claim = answer.verification["claims"][1]
    assert claim["cited"] == [trip] and claim["attributed_to"] == garden and claim["judged"] == [garden]
    judged = llm.judged[-1][-1]["content"]
    assert f"[{garden}]" in judged and f"[{trip}]" not in judged
    assert answer.text.endswith(f"after the warm spring rain. [{garden}]")
    assert [c["id"] for c in answer.citations] == [garden]
    assert answer.verification["claims"][0]["attributed_to"] is None  # a short answer's few words stay as cited


def test_an_answer_citing_nothing_cites_the_excerpts_its_sentences_come_from(garden_and_trip, settings: Settings):
    question = "What about the tomatoes and the river trip?"
    ids = _ids(ask_without_llm(garden_and_trip, question))
    text = "Answer: The tomatoes ripened early after the warm spring rain.\nWe flew to Lisbon and stayed by the river."
    answer = ask_with_llm(garden_and_trip, question, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0, 2.0]))
    assert [c["attributed_to"] for c in answer.verification["claims"]] == [ids["Garden"], ids["Lisbon trip"]]
    assert answer.text == (
        f"Answer: The tomatoes ripened early after the warm spring rain. [{ids['Garden']}]\n"
        f"We flew to Lisbon and stayed by the river. [{ids['Lisbon trip']}]"
    )
    assert "no_citations" not in [w["kind"] for w in answer.citation_warnings]


def test_a_sentence_whose_citation_holds_its_words_keeps_it(garden_and_trip, settings: Settings):
    from crossmodalrag.answer.attribution import word_source

    question = "What about the tomatoes and the river trip?"
    evidence = ask_without_llm(garden_and_trip, question).evidence
    garden = next(item for item in evidence if item.hit.title == "Garden")
    trip = next(item for item in evidence if item.hit.title == "Lisbon trip")
    copied = "The tomatoes ripened early after the warm spring rain"
    assert word_source(copied, [trip], evidence) is garden
    assert word_source(copied, [garden], evidence) is None  # cited where its words are
    assert word_source(copied, [trip, garden], evidence) is None
    assert word_source("tomatoes ripened early", [trip], evidence) is None  # too few words to tell
    assert word_source("We sold the old car to a neighbour", [trip], evidence) is None  # no excerpt holds it
    assert word_source(copied, [], evidence) is garden  # an answer citing nothing
    half = "The tomatoes ripened while we sold the car and painted the shed"  # 2 of its 6 content words
    assert word_source(half, [trip], evidence) is None and word_source(half, [], evidence) is garden


def test_a_question_about_someone_whose_own_words_are_few_of_the_evidence_is_not_asked(
    store, settings: Settings, tmp_path
):
    """LoCoMo's adversarial questions put one person's words in the other's mouth: the best matches
    are then mostly the other person's turns."""
    lines = [
        ("Joanna", "I made caramel ice cream on Sunday."),
        ("Nate", "Sounds great, I love ice cream."),
        ("Joanna", "The caramel ice cream came out rich and creamy."),
        ("Joanna", "Next time I will make caramel ice cream with sea salt."),
        ("Joanna", "My caramel ice cream recipe uses coconut milk."),
        ("Nate", "My turtles love the new tank."),
    ]
    retriever = chat_retriever(store, settings, tmp_path, lines, sessions=len(lines))
    llm = ScriptedLLM("Answer: rich and creamy [E1]", margins=[3.0, 3.0])
    question = "How did {} like the caramel ice cream?"
    answer = ask_with_llm(retriever, question.format("Nate"), settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "subject_missing"
    assert llm.judged == [] and llm.calls == []  # no model call at all
    assert 0 < answer.verification["subject_share"] < answer.verification["subject_min_share"] == 0.4
    assert "20% of the evidence is in the own words of whom the question names (needs 40%)" in why_line(answer)
    answer = ask_with_llm(retriever, question.format("Joanna"), settings, llm=llm)
    assert not answer.abstained and answer.verification["subject_share"] >= 0.6
    settings.abstain_min_subject_share = 0.0  # off: the model is asked (and its answer from Joanna's words fails)
    answer = ask_with_llm(retriever, question.format("Nate"), settings, llm=llm)
    assert answer.abstention_reason == "unsupported" and len(llm.calls) == 2


def test_an_answer_in_the_other_persons_words_fails_even_citing_the_named_persons_turn(
    store, settings: Settings, tmp_path
):
    """A wrong-person question answered from the other side's turn, with the named person's turn cited
    beside it: the cited turn passes the names check and the judge reads words, not people."""
    lines = [
        ("Nate", "Aww, childhood memories can be so powerful!"),
        ("Joanna", "My brother wrote it - he used to make me these cute notes when we were kids."),
        ("Nate", "Brothers are the best, mine taught me to fish when we were kids."),
    ]
    retriever = chat_retriever(store, settings, tmp_path, lines)
    settings.abstain_min_subject_share = 0.0  # every turn of a 3-turn chat matches through its title: the
    # subject share (tested apart) would count them all; this test is about the sentence check
    llm = ScriptedLLM("Answer: cute notes his brother wrote [E1][E2][E3]", margins=[3.0, 3.0])
    question = "What did {} receive from a brother that brought back childhood memories?"
    answer = ask_with_llm(retriever, question.format("Nate"), settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert [c["reason"] for c in answer.to_dict()["verification"]["claims"]] == ["other_speaker"]
    assert len(llm.judged) == 1  # the gate only: the claim failed without the judge
    # The same answer to the question about the person who said it stands.
    answer = ask_with_llm(retriever, question.format("Joanna"), settings, llm=llm)
    assert not answer.abstained and answer.short_answer == "cute notes his brother wrote"


def test_a_cited_turn_of_the_other_person_is_judged_by_the_named_persons_turn_next_to_it(
    store, settings: Settings, tmp_path
):
    """The model cites the other side's question ("Do you play any instruments?") instead of the
    named person's reply to it: the reply, retrieved too, is what the sentence is judged against."""
    lines = [
        ("Joanna", "Do you play any instruments, Nate?"),
        ("Nate", "Yeah, I play clarinet! Started when I was young."),
        ("Joanna", "My turtles love the new tank."),
    ]
    retriever = chat_retriever(store, settings, tmp_path, lines)
    settings.abstain_min_subject_share = 0.0  # every turn of a 3-turn chat matches through its title: the
    # subject share (tested apart) would count them all; this test is about the sentence check
    question = "What instruments does Nate play?"
    hits = retriever.search(question).hits
    asked = next(i for i, hit in enumerate(hits, 1) if hit.text.split("\n", 1)[1].startswith("Joanna"))
    llm = ScriptedLLM(f"Answer: clarinet [E{asked}]", margins=[3.0, 3.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    judged = llm.judged[-1][-1]["content"]
    assert "I play clarinet" in judged and "Do you play" not in judged
    assert not answer.abstained and answer.short_answer == "clarinet"


def test_a_question_naming_a_date_is_not_answered_from_turns_of_another_time(store, settings: Settings, tmp_path):
    """LoCoMo's adversarial questions also move an event to another day ("What movie did Tim just
    finish watching on 8th December, 2023?" answered from a turn of August)."""
    lines = [("Nate", "We love the movie The Santa Clause, so festive!")]
    lines += [
        ("Joanna", f"My turtles ate {food} today.") for food in "kale pears figs plums peas oats rice corn".split()
    ]
    lines += [("Nate", "I just finished watching the movie Inception.")]
    retriever = chat_retriever(store, settings, tmp_path, lines, len(lines), day="1:00 pm on {} October, 2022")

    def ask(question: str):  # the answer cites the Santa Clause turn, wherever it ranks
        hits = retriever.search(question).hits
        santa = next(i for i, hit in enumerate(hits, 1) if "Santa" in hit.text.split("\n", 1)[1])
        return ask_with_llm(retriever, question, settings, llm=ScriptedLLM(f"Answer: The Santa Clause [E{santa}]"))

    answer = ask("What movie did Nate finish watching on 10 October, 2022?")
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.to_dict()["verification"]["claims"][0]["reason"] == "other_time"
    assert not ask("What movie did Nate finish watching on 3 October, 2022?").abstained  # within a week
    assert not ask("What movie did Nate finish watching?").abstained


def test_sentences_judged_supported_cite_what_they_were_judged_against_in_the_layout_written(
    retriever, settings: Settings
):
    text = (
        "Answer: The tokenizer was rewritten because the regexes backtracked for minutes. "
        "The old regexes backtracked on long lines of unclosed brackets. They were replaced [E1].\n"
        "- The rewrite made the tests faster [E2]."
    )
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0] * 5))
    assert answer.text == (  # not E2 too: judged beside E1, it holds none of the short answer's own words
        "Answer: The tokenizer was rewritten because the regexes backtracked for minutes. [E1] "
        "The old regexes backtracked on long lines of unclosed brackets. [E1] They were replaced [E1].\n"
        "- The rewrite made the tests faster [E2]."
    )
    assert "uncited_claim" not in [w["kind"] for w in answer.citation_warnings]


def test_a_sentence_citing_nothing_that_the_judge_leaned_against_is_not_given_a_citation(retriever, settings: Settings):
    """Passed by the claims' tolerance (-1.0) at -0.5 against its closest excerpt, a guess, it was
    shown citing that excerpt, which never said it; left out instead, as one with nothing to cite."""
    text = (
        "Answer: The tokenizer was rewritten [E1][E2].\n"
        "Tomasz estimates a week. The rewrite made the tests faster [E2]."
    )
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0, -0.5, 2.0]))
    claims = answer.verification["claims"]
    assert [(c["sentence"], c["supported"], c["reason"]) for c in claims][1] == (
        "Tomasz estimates a week.",
        False,
        "uncited",
    )
    assert "Tomasz" not in answer.text and answer.text.endswith("The rewrite made the tests faster [E2].")


def test_an_invented_citation_is_still_reported_when_a_sentence_is_dropped(retriever, settings: Settings):
    text = "Answer: regexes backtracked [E1][E7].\nThe tests ran on a Tuesday [E2]."
    llm = ScriptedLLM(text, margins=[2.0, 2.0, -3.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.text == "Answer: regexes backtracked [E1]."
    assert [w["kind"] for w in answer.citation_warnings] == ["invalid_citation", "unsupported_claim"]


def test_a_sentence_repeating_an_earlier_one_is_left_out_unchecked_and_not_reported(retriever, settings: Settings):
    text = (
        "Answer: The regexes backtracked on unclosed brackets [E1].\n"
        "The regexes backtracked, on unclosed brackets. Then the tests got faster again [E2]."
    )
    llm = ScriptedLLM(text, margins=[2.0, 2.0, 2.0])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    claims = answer.verification["claims"]
    assert [(c["reason"], c["margin"] is None) for c in claims] == [(None, False), ("repeated", True), (None, False)]
    assert len(llm.judged) == 3  # the gate and two checks: none spent on the repeat
    kept = "Answer: The regexes backtracked on unclosed brackets [E1].\nThen the tests got faster again [E2]."
    assert answer.text == kept
    assert answer.citation_warnings == []


@pytest.mark.parametrize(
    "answer, question, restates",
    [
        ("painting", "What kind of painting does John have in his room as a reminder?", True),
        ("Slow cooker meals", "What type of meal does Tim often cook using a slow cooker?", True),
        ("Fiction stories", "What kind of fiction stories does Tim write?", True),
        ("fantasy stories", "What kind of fiction stories does Tim write?", False),
        ("national park", "Would Melanie prefer a national park or a theme park?", False),  # naming one answers
        ("Melanie", "Who is older, Melanie or Caroline?", False),
        ("Yes", "Did Melanie paint the bowl?", False),
        ("No", "Did Melanie paint the bowl?", False),
        ("Vitamin D lowers blood pressure", "Vitamin D lowers blood pressure.", False),  # a statement affirmed
        ("twice", "How often did he go?", False),
        ("a temp job", "What temporary job did Jon take to cover expenses?", True),  # said clipped
        ("the info desk", "What information did Gina get?", False),  # "desk" is new
        ("art", "What artistic hobby does Jon have?", False),  # too short to be a clipping
        # mem ask with qwen2.5-coder-1.5b: a CJK run was one word, the answer's another
        ("数据迁移方案", "和王磊讨论了什么数据迁移方案？", True),
        ("双写迁移方案", "和王磊讨论了什么数据迁移方案？", False),  # 双写 is new
        ("データ移行", "王さんとどのデータ移行方法を話した？", True),
        ("Helios", "HeliosはどのDBを使っている？", True),
        ("PostgreSQL", "HeliosはどのDBを使っている？", False),
    ],
)
def test_a_short_answer_restating_the_question_is_recognised(answer: str, question: str, restates: bool):
    assert restates_question(answer, question) is restates


def test_a_short_answer_only_repeating_the_question_abstains_without_the_judge(retriever, settings: Settings):
    """ "What kind of tokenizer ...?" answered "tokenizer" tells the user nothing the question did not."""
    question = "What kind of tokenizer did I rewrite?"
    llm = ScriptedLLM(
        "Answer: the tokenizer [E1]\nI rewrote the tokenizer because regexes backtracked [E1].", margins=[2.0] * 3
    )
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.verification["claims"][0]["reason"] == "restates_question"
    assert answer.verification["claims"][0]["margin"] is None
    assert 'only repeats words of the question ("the tokenizer")' in answer.text


@pytest.mark.parametrize(
    "question, asks_about_a_given",
    [
        ("For how long has Nate had his snakes?", True),
        ("Where was the photoshoot done for John's fragrance deal?", True),
        ("Does Nate have snakes?", False),  # a yes/no question asks whether: "no" answers it
        ("Would Nate enjoy keeping snakes?", False),  # a conjecture
        ("Did Nate buy snakes or turtles?", False),  # a choice
        ("Nate has had snakes for three years.", False),  # a statement
        ("Wie lange hat Nate seine Schlangen?", False),  # English only: the check's prompt and fit are
        ("奈特养蛇多久了？", False),
    ],
)
def test_premise_checks_only_english_questions_asking_about_something_given(question, asks_about_a_given):
    assert presupposes(question) is asks_about_a_given


TURTLES = [
    ("Nate", "I've had my turtles for 3 years now and they bring me tons of joy!"),
    ("Joanna", "Wow, three years! Do they have names?"),
    ("Nate", "Yes, and they love their new tank in the living room."),
]


def test_unmentioned_words_are_the_questions_content_words_no_excerpt_holds(store, settings: Settings, tmp_path):
    retriever = chat_retriever(store, settings, tmp_path, TURTLES)
    evidence = retriever.search("How long has Nate had his turtles?").hits
    items = [type("Item", (), {"hit": hit})() for hit in evidence]
    # "turtle" is held in another form, "Nate" is a name, "how long" asks, "had" is a function word.
    assert unmentioned_words("For how long has Nate had his turtle?", items) == []
    assert unmentioned_words("For how long has Nate had his snakes in March?", items) == ["snakes"]
    assert unmentioned_words("For how long has Nate had his snakes?", []) == []


def test_an_answer_resting_on_evidence_that_never_speaks_of_the_questions_premise_is_withheld(
    store, settings: Settings, tmp_path
):
    """LoCoMo's adversarial questions swap one detail: asked about snakes, the judge reads the turtles
    turn as the answer. Asked narrowly whether that turn speaks of snakes, the model says no."""
    retriever = chat_retriever(store, settings, tmp_path, TURTLES)
    question = "For how many years have the snakes of Nate brought him joy?"
    llm = ScriptedLLM("Answer: 3 years [E1]", margins=[2.0, 3.0, -2.0])  # the gate, the short answer, snakes
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.verification["premise"] == {"snakes": -2.0} and answer.verification["premise_min_margin"] == -0.25
    assert [c["reason"] for c in answer.verification["claims"]] == ["premise_missing"]
    assert answer.text.startswith('No answer: the question takes "snakes" as given')
    assert 'do not speak of "snakes", which the question takes as given (margin -2.00, needs -0.25)' in why_line(answer)
    claim, premise = (prompt[-1]["content"] for prompt in llm.judged[1:])
    assert "Claim: The answer to" in claim and "Does this evidence speak of snakes" in premise
    assert claim.split("\n\nClaim:")[0] == premise.split("\n\nDoes this")[0]  # one prefix: the KV cache serves both
    # A margin above the threshold keeps the answer; with the check off, the model is not asked.
    llm = ScriptedLLM("Answer: 3 years [E1]", margins=[2.0, 3.0, 0.5])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert (
        not answer.abstained and answer.short_answer == "3 years" and answer.verification["premise"] == {"snakes": 0.5}
    )
    settings.verify_min_premise_margin = None
    llm = ScriptedLLM("Answer: 3 years [E1]", margins=[2.0, 3.0, -2.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert not answer.abstained and "premise" not in answer.verification and len(llm.judged) == 2


def test_the_premise_check_asks_only_of_conversation_turns(retriever, settings: Settings):
    """Over documents the model says no to the words of a question's instructions ("What drove ...",
    "Basing your judgments off of ..."): the check was fitted on conversations and stays there."""
    llm = ScriptedLLM("Answer: regexes backtracked [E1]", margins=[2.0, 3.0, -5.0])
    answer = ask_with_llm(retriever, "What drove the tokenizer rewrite?", settings, llm=llm)
    assert not answer.abstained and "premise" not in answer.verification
    assert not any("Does this evidence speak of" in prompt[-1]["content"] for prompt in llm.judged)


def test_a_chat_turn_is_listed_with_its_session_title_once(store, settings: Settings, tmp_path):
    """A turn's locator opens with its session's title: "title — locator" said the title twice."""
    retriever = chat_retriever(store, settings, tmp_path, [("Nate", "My turtles love the new tank.")])
    answer = ask_without_llm(retriever, "turtles tank")
    heading = answer.text.splitlines()[1]
    assert heading.startswith("[E1] Nate & Joanna · session 1 (1 October, 2022)")
    assert heading.count("Nate & Joanna") == 1 and "D1:1 (conversation" in heading


def test_a_heading_or_a_line_of_citations_alone_is_not_shown_as_written(retriever, settings: Settings):
    """The sample's XSS answer ended in "Support:" and "- [E1] [E2]", lines with no words of a claim:
    their citations go to the sentence before them and the answer reads as prose."""
    text = "Answer: The titles are escaped [E1].\nLinks could close the title early.\n\nSupport:\n- [E1] [E2]"
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0] * 5))
    assert answer.text == "Answer: The titles are escaped [E1].\nLinks could close the title early. [E1][E2]"


def test_a_sentence_of_only_tags_and_citations_is_no_claim(retriever, settings: Settings):
    """A Chinese answer ended "#重构 [E1][E2]": the note's tag, judged as a claim and kept, citing an
    excerpt that has nothing to do with it."""
    assert split_answer("Answer: yes [E1]\nIt is three times faster. [E1] #重构 [E1][E2]\n#refactor #parser [E2]") == [
        ("Answer: yes [E1]", True),
        ("It is three times faster. [E1]", False),
    ]
    assert split_answer("Answer: bug #12 [E1]\nAda fixed bug #12. [E1]")[1] == ("Ada fixed bug #12. [E1]", False)
    text = "Answer: The titles are escaped [E1].\nLinks could close the title early. [E1] #security [E1][E2]"
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0] * 5))
    assert [c["sentence"] for c in answer.verification["claims"]] == [
        "Answer: The titles are escaped [E1].",
        "Links could close the title early. [E1]",
    ]
    assert answer.text == "Answer: The titles are escaped [E1].\nLinks could close the title early. [E1]"


def test_a_passed_sentence_left_with_nothing_to_cite_is_left_out_but_never_the_last(retriever, settings: Settings):
    """The README's answer cited nothing itself; its sentences copied from a note cite that note, and
    "The change was made to address this issue ..." (a few words of no one excerpt) was shown uncited."""
    text = "The tokenizer was rewritten because regexes backtracked. Tests got faster after that."
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(text, margins=[2.0] * 3))
    claims = answer.verification["claims"]
    assert [(c["supported"], c["reason"], c["attributed_to"] is None) for c in claims] == [
        (True, None, False),
        (False, "uncited", True),
    ]
    assert "Tests got faster" not in answer.text and not answer.abstained
    assert [w["kind"] for w in answer.citation_warnings] == []  # left out, not reported as unsupported
    alone = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("Tests got faster.", margins=[2.0] * 2))
    assert alone.text == "Tests got faster." and alone.verification["claims"][0]["reason"] is None


def test_chinese_and_japanese_sentences_end_at_full_width_marks() -> None:
    answer = "Answer: 位于底特律希腊城梦露街441号。它是美国中西部最古老的黑人教堂。[E1] 建于1836年！[E2]"
    assert sentences(answer) == [
        "Answer: 位于底特律希腊城梦露街441号。",
        "它是美国中西部最古老的黑人教堂。[E1]",
        "建于1836年！[E2]",
    ]
    assert short_answer(answer) == "位于底特律希腊城梦露街441号"
    assert sentences("会議は三時です。[E1][E2]次は四時。") == ["会議は三時です。[E1][E2]", "次は四時。"]


def test_a_hedge_denying_the_short_answer_in_other_words_is_left_out(store, settings: Settings, tmp_path):
    """mem ask "Which database does Helios use?" with qwen2.5-coder-1.5b ended its passed answer with
    "No excerpt directly states that Helios uses PostgreSQL 16.", shown unchecked: the old rule
    matched "uses" to "use" by no prefix (a 3-letter word) and kept it."""
    notes = {"helios-db.md": "# Helios database choice\n\nWe chose PostgreSQL 16 for Helios.\n"}
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Which database does Helios use?"
    for hedge in (
        "No excerpt directly states that Helios uses PostgreSQL 16.",
        "No excerpt states that Helios uses it.",
    ):
        text = f"Answer: PostgreSQL 16 [E1]\nWe chose PostgreSQL 16 for Helios. [E1] {hedge}"
        answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0, 2.0]))
        assert answer.text == "Answer: PostgreSQL 16 [E1]\nWe chose PostgreSQL 16 for Helios. [E1]"
        assert answer.to_dict()["verification"]["claims"][-1]["reason"] == "hedge"


def test_a_hedge_denying_what_the_cited_excerpt_names_is_left_out(store, settings: Settings, tmp_path):
    """mem ask "Who migrated the Helios billing database to PostgreSQL 16, and when?" with
    qwen2.5-coder-1.5b ended its passed answer with "No excerpt mentions Bob Ramirez or the timing of
    the migration.", kept unchecked (it names few of the question's words) though E1 names him."""
    notes = {
        "migration.md": "# Helios migration\n\nAlice Chen and Bob Ramirez migrated the Helios billing database "
        "to PostgreSQL 16 on 14 February 2025.\n"
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Who migrated the Helios billing database to PostgreSQL 16, and when?"
    short = "Answer: Alice Chen and Bob Ramirez, on 14 February 2025 [E1]"
    for hedge, kept in (
        ("No excerpt mentions Bob Ramirez or the timing of the migration.", False),
        ("No excerpt says why they migrated.", True),
    ):
        answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(f"{short}\n{hedge}", margins=[2.0, 2.0]))
        assert answer.text == (f"{short}\n{hedge}" if kept else short)


def test_a_second_look_adds_only_excerpts_holding_the_sentences_numbers(store, settings: Settings, tmp_path):
    """mem ask "Wie viel kostet die Miete ...?" with qwen2.5-coder-1.5b: "Answer: 1,850 warm [E1]"
    failed against the lease's first page, passed beside the three excerpts holding a word of it the
    page lacks, and cited all three: "1" was that word in "Budget cap €1,700" and "EUR 1,540"."""
    notes = {
        "lease.md": "# Lease Altona\n\nResidential lease for the flat in Altona between Hanseatic Homes and me.\n",
        "moving.md": "# Moving\n\nSigned the lease for the flat in Altona. Rent is €1,850 warm.\n",
        "search.md": "# Apartment search\n\nLooking at flats in Altona. Budget cap €1,700.\n",
        "rent.md": "# Lease rent\n\nThe monthly base rent for the flat in Altona is EUR 1,540.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "How much is the rent for the flat in Altona?"
    ids = evidence_ids(retriever, question)
    assert len(ids) == 4
    evidence = ask_without_llm(retriever, question).evidence
    lease, moving = (next(item for item in evidence if item.hit.title == title) for title in ("Lease Altona", "Moving"))
    assert excerpts_holding_missing_words("1,850 warm", question, [lease], evidence) == [moving]
    # Cited to the page, which states no figure of it, it is judged against where "1,850" is stated
    # (attribution.py `figure_source`), before any second look.
    llm = ScriptedLLM(f"Answer: 1,850 warm [{ids['Lease Altona']}]", margins=[2.0, 1.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    claim = answer.to_dict()["verification"]["claims"][0]
    assert claim["attributed_to"] == ids["Moving"] and claim["judged"] == [ids["Moving"]]
    assert answer.text == f"Answer: 1,850 warm [{ids['Moving']}]"


def test_a_sentence_attributed_to_one_excerpt_also_cites_those_holding_its_other_numbers_and_names(
    store, settings: Settings, tmp_path
):
    """mem ask "What happened in July 2025?": one sentence named a car sale, an outage and a lease,
    and was attributed to (and cited only) the outage note."""
    notes = {
        "car.md": "---\ndate: 2025-08-01\n---\n# Car\n\nSold the VW Polo in August 2025 for €6,200.\n",
        "incident.md": "---\ndate: 2025-07-22\n---\n# Incident\n\n"
        "Outage of 47 minutes on 22 July 2025 caused by a full disk on the Hetzner box.\n",
        "moving.md": "---\ndate: 2025-07-01\n---\n# Moving\n\nSigned the lease for the flat in Hamburg in July 2025.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "What happened in July 2025?"
    ids = evidence_ids(retriever, question)
    text = (
        "Answer: July 2025 saw an outage of 47 minutes on 22 July 2025 caused by a full disk on the Hetzner box, "
        "and the sale of the VW Polo."
    )
    answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text, margins=[2.0, 2.0]))
    claim = answer.to_dict()["verification"]["claims"][0]
    assert claim["attributed_to"] == ids["Incident"]
    assert sorted(claim["judged"]) == sorted([ids["Incident"], ids["Car"]])
    assert f"[{ids['Car']}]" in answer.text and f"[{ids['Moving']}]" not in answer.text


def test_a_copied_evidence_header_without_its_kind_is_no_sentence_of_the_answer(store, settings: Settings, tmp_path):
    """mem ask with qwen2.5-coder-1.5b: "[E2] (Helios pricing · projects/helios/2025-01-20-helios-pricing.md
    · 20 January 2025)" was judged as a support sentence, and passed."""
    notes = {"helios-pricing.md": "---\ndate: 2025-01-20\n---\n# Helios pricing\n\nTeam plan: $30 per seat.\n"}
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    text = "Answer: $30 per seat [E1]\n[E1] (Helios pricing · helios-pricing.md · 20 January 2025)"
    answer = ask_with_llm(retriever, "What is the Helios team plan price?", settings, llm=ScriptedLLM(text))
    assert answer.text == "Answer: $30 per seat [E1]"
    assert len(answer.to_dict()["verification"]["claims"]) == 1  # the short answer alone was judged


def test_a_full_name_is_one_person_in_the_withheld_message(store, settings: Settings, tmp_path):
    """mem ask "Did John Millar replace my boiler?" was withheld as "not about John or Millar"."""
    notes = {
        "john-millar.md": "# John Millar\n\nJohn Millar is my accountant.\n",
        "jon-miller.md": "# Jon Miller\n\nJon Miller is the plumber who replaced the boiler.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Did John Millar replace my boiler?"
    plumber = evidence_ids(retriever, question)["Jon Miller"]
    llm = ScriptedLLM(f"Answer: Yes [{plumber}]\nJon Miller replaced the boiler [{plumber}].", margins=[3.0])
    answer = ask_with_llm(retriever, question, settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert "is not about John Millar, as the question asks" in answer.text


def test_a_passed_sentence_no_longer_cites_an_excerpt_judged_beside_it_that_holds_none_of_its_words(
    store, settings: Settings, tmp_path: Path
):
    """ "Her deputy is Bob Ramirez … [E1][E2]" passed against the roster and a migration decision that
    only names Alice, judged together: the roster carried the decision, and the answer cited it."""
    notes = {
        "roster.md": "# Team roster\n\nAlice owns the billing service. Her deputy is Bob Ramirez, from payments.\n",
        "migration.md": "# Helios migration decision\n\nWe kept logical replication off; Alice will revisit it.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Who is Alice's deputy?"
    ids = evidence_ids(retriever, question)
    roster, decision = ids["Team roster"], ids["Helios migration decision"]
    text = (
        f"Answer: Bob Ramirez [{roster}] [{decision}]\nHer deputy is Bob Ramirez, from payments. [{roster}][{decision}]"
    )
    answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text, margins=[2.0] * 3))
    assert answer.text == f"Answer: Bob Ramirez [{roster}]\nHer deputy is Bob Ramirez, from payments. [{roster}]"
    claims = answer.verification["claims"]
    assert [c["unrelated_citations"] for c in claims] == [[decision], [decision]]
    assert claims[1]["cited"] == [roster, decision] and [c["id"] for c in answer.citations] == [roster]
    yes = ask_with_llm(retriever, "Is Bob Alice's deputy?", settings, llm=ScriptedLLM("Answer: Yes [E1][E2]"))
    assert yes.text == "Answer: Yes [E1][E2]"  # no word of its own to compare: left as it is


def test_a_days_number_is_no_figure_a_version_number_shares(store, settings: Settings, tmp_path):
    """ "PostgreSQL 16 was chosen as the new database for Kestrel [E4][E1][E2][E3]": the second look
    added the two deadline notes, whose "16 November 2026" held the sentence's "16"."""
    notes = {
        "decision.md": "# Kestrel database\n\nWe chose a new database for Kestrel after the review.\n",
        "deadline.md": "# Kestrel deadline\n\nThe Kestrel deadline moved again, from 16 November 2026 to 25 January.\n",
        "plan.md": "# Kestrel v2 plan\n\nKestrel v2 runs on PostgreSQL 16 from the start.\n",
    }
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    question = "Which database was chosen for Kestrel?"
    evidence = ask_without_llm(retriever, question).evidence
    decision, plan = (
        next(item for item in evidence if item.hit.title == title) for title in ("Kestrel database", "Kestrel v2 plan")
    )
    claim = "PostgreSQL 16 was chosen as the new database for Kestrel."
    assert excerpts_holding_missing_words(claim, question, [decision], evidence) == [plan]
    # A day is still a name of its own, whatever its form: the same day written otherwise is found.
    assert specific_words("We met on Nov 16, 2026.") == specific_words("We met on 2026-11-16.") == {"11-16"}
