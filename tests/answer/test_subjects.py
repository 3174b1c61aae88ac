"""Whom a question names, and whether cited evidence mentions them."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.subjects import (
    another_subject,
    excerpts_about,
    full_names,
    mentions_any,
    named_subjects,
    speaker,
    subject_share,
)
from crossmodalrag.types import Evidence, Hit


def excerpt(text: str, title: str = "chat") -> Evidence:
    hit = Hit(1, "note:x", "note", "text", title, "", text, None)
    return Evidence(id="E1", hit=hit)


def stored(text: str, locator: str, kind: str = "note", title: str = "Pricing decision") -> Evidence:
    hit = Hit(3, f"/home/ana/{locator}", kind, "text", title, locator, text, None)
    return Evidence(id="E3", hit=hit)


def turn(body: str, previous: str = "") -> Evidence:
    """A turn as `mem ingest-chat` stores it: a breadcrumb naming both people, then `Speaker: text`."""
    crumb = "Nate & Joanna · session 3 · 2022-10-09" + (f" · re: {previous}" if previous else "")
    hit = Hit(2, "chat.json@s3", "conversation", "text", "Nate & Joanna · session 3", "", f"{crumb}\n{body}", None)
    return Evidence(id="E2", hit=hit)


@pytest.mark.parametrize(
    "question, names",
    [
        ("What did Caroline realize after her charity race?", ["caroline"]),
        ("What are Melanie's plans for the summer?", ["melanie"]),
        ("Did Caroline and Melanie meet in May?", ["caroline", "melanie"]),
        ("Caroline went where?", []),  # the first word of a sentence is not taken for a name
        ("Why did I rewrite the tokenizer? Because BM25 was slow?", []),  # acronyms are not names
        ("What did I do on Friday?", []),
        ("Wann hat Caroline die Gruppe besucht?", []),  # German capitalises every noun
    ],
)
def test_named_subjects(question, names):
    assert named_subjects(question) == names


@pytest.mark.parametrize(
    "question, names",
    [
        ("Did John Millar replace my boiler?", ["john millar"]),
        ("Did Caroline and Melanie meet in May?", ["caroline", "melanie"]),
        ("Did Jon Miller's quote beat John Millar's?", ["jon miller", "john millar"]),
        ("What did I do on Friday?", []),
    ],
)
def test_full_names_keep_a_run_of_names_as_one_person(question, names):
    assert full_names(question) == names


def test_mentions_any_reads_title_and_text_as_word_starts_without_accents():
    assert mentions_any([excerpt("Melanie: I ran a charity race")], ["melanie"])
    assert mentions_any([excerpt("I said it", title="Zoë 1:1")], ["zoe"])
    assert mentions_any([excerpt("That is Caroline's idea")], ["caroline"])
    assert not mentions_any([excerpt("Melanie: I ran a charity race")], ["caroline"])


def test_a_name_only_spoken_to_is_the_listener_not_the_subject():
    assert not mentions_any([excerpt("Melanie: Thanks, Caroline! I realized self-care matters.")], ["caroline"])
    assert not mentions_any([excerpt("Caroline: Hey Melanie, this necklace is from my grandma.")], ["melanie"])
    assert mentions_any([excerpt("Caroline: Melanie's kids loved the museum.")], ["melanie"])


def test_a_turn_is_about_its_speaker_not_about_the_people_its_title_and_breadcrumb_name():
    joanna = turn("Joanna: I made caramel ice cream and it was delicious!", previous="Nate: What did you cook?")
    nate = turn("Nate: My turtles cheer me up.")
    assert speaker(joanna) == "joanna" and speaker(excerpt("Joanna: hi")) is None  # only conversations have speakers
    everything = [joanna, nate]
    assert excerpts_about([joanna], ["joanna"], everything) == [joanna]
    assert excerpts_about([joanna], ["nate"], everything) == []  # Nate takes part: only his own turns are about him
    assert excerpts_about([joanna, nate], ["nate"], everything) == [nate]


def test_outside_conversations_and_for_people_who_only_come_up_in_one_a_mention_counts():
    joanna = turn("Joanna: My brother Tom wrote me a letter.")
    assert excerpts_about([joanna], ["tom"], [joanna]) == [joanna]  # Tom never speaks: her words about him count
    assert excerpts_about([turn("Joanna: A letter came.", previous="Nate: Did Tom call?")], ["tom"], [joanna]) == []
    note = excerpt("Nate adopted a third turtle", title="pets.md")
    assert excerpts_about([note], ["nate"], [joanna, turn("Nate: hi")]) == [note]


def test_subject_share_counts_the_named_participants_own_turns():
    joanna = turn("Joanna: I made caramel ice cream and it was delicious!")
    nate = turn("Nate: My turtles cheer me up.")
    evidence = [joanna, joanna, nate, joanna]
    assert subject_share("What cheers Nate up?", evidence) == 0.25
    assert subject_share("What did Joanna make?", evidence) == 0.75
    assert subject_share("What did Nate and Joanna do?", evidence) == 1.0
    assert subject_share("What cheers him up?", evidence) is None  # names nobody
    assert subject_share("What did Caroline say?", evidence) is None  # nobody taking part in these chats
    assert subject_share("What did Nate say?", [excerpt("Nate: hi")]) is None  # notes have no speakers


def test_another_subject_is_whom_a_sentence_is_about_when_not_the_person_asked_about():
    nate = turn("Nate: Aww, childhood memories can be so powerful!")
    joanna = turn("Joanna: My brother wrote it - he used to make me these cute notes when we were kids.")
    evidence = [nate, joanna]
    question = "What did Nate receive from his brother that brought back childhood memories?"
    assert another_subject("Joanna's brother wrote her notes", question, evidence) == "joanna"  # opens with her
    assert another_subject("cute notes he wrote", question, evidence) == "joanna"  # her words, none of his
    assert another_subject("Joanna", question, evidence) is None  # a name alone answers "who"
    assert another_subject("Joanna's notes made Nate smile", question, evidence) is None  # names him too
    assert another_subject("powerful memories", question, evidence) is None  # his words
    assert another_subject("21 January 2022", question, evidence) is None  # no words of its own
    assert another_subject("cute notes", question.replace("Nate", "Joanna"), evidence) is None
    assert another_subject("cute notes", "What did Tom get?", evidence) is None  # Tom takes no part


@pytest.mark.parametrize(
    "locator, kind",
    [
        ("work/2025-01-20-helios-pricing.md", "note"),  # named after it
        ("Helios/pricing.md#Decision > Price", "note"),  # in its folder
        ("work/Hélios_pricing.md", "note"),  # accents, case and underscores
        ("helios-pricing.pdf p.1", "pdf"),
        ("whiteboard helios.png", "image"),
        ("helios@d5fb445 src/billing.py", "commit"),  # the repository
    ],
)
def test_an_excerpt_is_about_what_the_path_it_is_known_by_names(locator, kind):
    """Notes in a project's folder or named after it rarely repeat its name (QA: "How much does Helios
    cost per month?" was withheld though the model answered from work/...-helios-pricing.md)."""
    item = stored("We settled on 29 euros per month per bakery.", locator, kind)
    assert excerpts_about([item], ["helios"], [item]) == [item]


def test_a_path_names_only_whole_words_inside_what_was_ingested():
    item = stored("We settled on 29 euros per month.", "work/heliostat-pricing.md")
    assert excerpts_about([item], ["helios"], [item]) == []  # a word's start is no name in a file name
    assert excerpts_about([item], ["ana"], [item]) == []  # the folder above the vault (/home/ana) is not read


def test_a_conversation_turn_is_not_about_whom_its_session_title_names():
    joanna = turn("Joanna: I made caramel ice cream.")
    joanna.hit.locator = "Nate & Joanna · session 3 · D3:2"
    assert excerpts_about([joanna], ["nate"], [joanna]) == []
