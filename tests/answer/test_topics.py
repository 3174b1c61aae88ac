"""Where a short answer's date comes from, and support sentences about notes the question never touches."""

from __future__ import annotations

from crossmodalrag.answer.verify import verify_answer
from crossmodalrag.types import Evidence, Hit
from tests.fakes import ScriptedLLM

QUESTION = "Wann wurde die Heizungsanlage gewartet und von wem?"
MAY_5 = 1714903200.0  # 5 May 2024, when the chat took place


def turn(number: int, text: str) -> Evidence:
    hit = Hit(number, "chat.json@1", "conversation", "text", "Heizung", f"Heizung · d{number}", f"x\n{text}", MAY_5)
    return Evidence(f"E{number}", hit)


def note(number: int, title: str, body: str) -> Evidence:
    hit = Hit(number, f"/v/{number}.md", "note", "text", title, f"{number}.md", f"crumb\n{body}", MAY_5)
    return Evidence(f"E{number}", hit)


EVIDENCE = [
    turn(1, "user: Wann wurde die Heizungsanlage gewartet?"),
    turn(2, "assistant: Die Heizungsanlage wurde am 3. Mai 2024 von der Firma Müller & Söhne gewartet."),
    note(3, "Reiseplanung Straßburg", "Die Zugfahrt nach Straßburg kostet 49,90 € pro Person."),
    note(4, "Viaje a Sevilla", "El vuelo a Sevilla sale el 20 de abril; la reserva es la número ABX-4471."),
]


def test_a_date_cited_to_an_excerpt_not_stating_it_is_judged_and_cited_where_it_is_stated() -> None:
    """The model cited the user's question for the date only the reply states, and the judge passed it
    there (-0.87): it is judged against the reply instead, and cites it."""
    llm = ScriptedLLM(margins=[1.3])
    verification = verify_answer(llm, QUESTION, EVIDENCE, "Answer: 3. Mai 2024 [E1]", -1.0)
    short = verification.verdicts[0]
    assert short.attributed == "E2" and short.judged == ["E2"] and short.supported
    assert "[E2]" in llm.judged[0][1]["content"] and "[E1]" not in llm.judged[0][1]["content"]
    assert verification.answer_text("Answer: 3. Mai 2024 [E1]") == "Answer: 3. Mai 2024 [E2]"


def test_a_date_the_cited_excerpt_states_or_computes_stays_with_it() -> None:
    llm = ScriptedLLM()
    stated = verify_answer(llm, QUESTION, EVIDENCE, "Answer: 3. Mai 2024 [E2]", -1.0)
    assert stated.verdicts[0].attributed is None and stated.verdicts[0].judged == ["E2"]
    on_its_day = verify_answer(llm, QUESTION, EVIDENCE, "Answer: 5 May 2024 [E1]", -1.0)  # its header date
    assert on_its_day.verdicts[0].attributed is None
    relative = [turn(1, "user: The heating was serviced yesterday."), EVIDENCE[1]]  # computed: 4 May 2024
    computed = verify_answer(llm, "When was the heating serviced?", relative, "Answer: 3. Mai 2024 [E1]", -1.0)
    assert computed.verdicts[0].attributed is None
    count = verify_answer(llm, QUESTION, EVIDENCE, "Answer: 3 [E1]", -1.0)  # a count or a day alone: no figure
    assert count.verdicts[0].attributed is None


def test_support_sentences_about_notes_neither_question_nor_answer_touch_are_dropped() -> None:
    """In a small memory every note is retrieved, and the model retold the train and flight notes after
    the date the heating was serviced: each passed against its own note."""
    text = (
        "Answer: 3. Mai 2024 [E2]\nDie Heizungsanlage wurde von Müller & Söhne gewartet [E2]. "
        "Die Zugfahrt nach Straßburg kostet 49,90 € pro Person [E3]. El vuelo a Sevilla sale el 20 de abril [E4]."
    )
    verification = verify_answer(ScriptedLLM(), QUESTION, EVIDENCE, text, -1.0)
    assert [v.reason for v in verification.verdicts] == [None, None, "off_topic", "off_topic"]
    assert [v.sentence for v in verification.dropped] == [v.sentence for v in verification.verdicts[2:]]
    assert verification.answer_text(text) == (
        "Answer: 3. Mai 2024 [E2]\nDie Heizungsanlage wurde von Müller & Söhne gewartet [E2]."
    )


def test_a_support_sentence_sharing_a_word_with_the_question_or_answer_stays() -> None:
    about = (
        "Answer: 3. Mai 2024 [E2]\nDie Zugfahrt nach Straßburg kostet 49,90 € pro Person, wie die Heizungsanlage [E3]."
    )
    answer = "Answer: Zugfahrt [E2]\nDie Zugfahrt nach Straßburg kostet 49,90 € pro Person [E3]."
    for text in (about, answer):
        verification = verify_answer(ScriptedLLM(), QUESTION, EVIDENCE, text, -1.0)
        assert all(v.supported for v in verification.verdicts), text
