"""Function words dropped from queries: they match everything and rank nothing.

Each list applies to its own language only: a query's language is guessed from which list its
words hit most (English when nothing stands out), and only that language's words are dropped, so
English `die` or `con` is never mistaken for German or Spanish and the other way round.
"""

from crossmodalrag.index.scripts import fold

ENGLISH = frozenset(
    """
a about above after again against all also am an and any are aren arent as at be because been
before being below between both but by can could d did didn didnt do does doesn doesnt doing don
dont down during each ever few for from further get give got had has have having he her here
hers herself him himself his how i if in into is isn isnt it its itself just let ll m me more
most my myself no nor not now o of off on once one only or other ought our ours ourselves out
over own please re s said same say says she should show so some such t tell than that the their
theirs them themselves then there these they this those through to too under until up us ve very
was wasn wasnt we were what when where which while who whom why will with won wont would y yet
you your yours yourself yourselves
""".split()
)
STOPWORDS = ENGLISH  # the name other modules import

GERMAN = frozenset(
    """
aber als am an auch auf aus bei bin bis bist da damit dann das dass dem den denn der des dich die
dir doch dort du durch ein eine einem einen einer eines er es etwa für hat hatte hatten ich ihr im
in ist ja je jede jedem jeden jeder kann kein keine man mich mir mit muss nach nicht noch nur ob
oder ohne sehr sein seine sich sie sind so über um und uns unter vom von vor war waren was weil
wann warum welche welchem welchen welcher welches wenn wer werden weshalb wie wieso wieviel wieviele
wird wo woher wohin worden wurde wurden zu zum zur
mein meine meinem meinen meiner meines dein deine deinem deinen deiner deines unser unsere unserem
unseren unserer unseres euer eure eurem euren eurer ihre ihrem ihren ihrer ihres seinem seinen seiner
seines wir ihm ihn ihnen habe haben hast habt dies diese diesem diesen dieser dieses
""".split()
)
SPANISH = frozenset(
    """
a al algo como con cual cuales cuando cuanta cuantas cuanto cuantos cuál cuáles cuándo cuánta
cuántas cuánto cuántos cómo de del donde dónde el ella ellos en entre era es esa ese eso esta este
esto fue fueron ha han hay la las le les lo los más me mi muy no nos o para pero por que quien
quienes quién quiénes qué se sin sobre son su sus también un una unos y ya
mis tu tus tú nuestro nuestra nuestros nuestras yo te ti mí he has hemos había
""".split()
)
VIETNAMESE_ACCENTED = frozenset(
    """
ai ấy bao bị bởi các cái chỉ cho có còn của cũng cùng đã đang đâu để đến đều đó được gì hay hoặc
hơn khi là lại lúc mà mấy một nào này nên nếu nhiêu như những nhưng nơi nữa ở ra rằng rất sao sẽ
tại theo thế thì trong từ vẫn vậy và vào về vì với
""".split()
)
# Also as typed without accents (đ kept, or as d): unaccented Vietnamese questions were guessed
# English or Spanish half the time (XQuAD vi), and so missed the Vietnamese syllable pairs.
VIETNAMESE = VIETNAMESE_ACCENTED | {
    form for word in VIETNAMESE_ACCENTED for form in (fold(word), fold(word).replace("đ", "d"))
}
FRENCH = frozenset(
    """
au aux avec ce ces combien comment dans de des du elle en est et il ils la le les leur lui mais
ne nous on ou où par pas pour pourquoi quand que quel quelle quelles quels qui sa se ses son sont
sur un une vous
je me mon ma mes ton ta tes notre nos votre vos leurs ai as avons avez ont tu te moi toi
""".split()
)
BY_LANGUAGE = {"en": ENGLISH, "de": GERMAN, "es": SPANISH, "fr": FRENCH, "vi": VIETNAMESE}
ANY_LANGUAGE = frozenset().union(*BY_LANGUAGE.values())  # a function word in one of them


# word -> the languages that list it: one dict lookup per word (every chunk's language is guessed
# at ingest, so this runs over every word stored).
LANGUAGES_OF = {
    word: tuple(language for language, words in BY_LANGUAGE.items() if word in words) for word in ANY_LANGUAGE
}


def guess_language(words: list[str]) -> str:
    """The language whose function words the lowercase words hit most; English on a tie or none."""
    hits = dict.fromkeys(BY_LANGUAGE, 0)
    for word in words:
        for language in LANGUAGES_OF.get(word, ()):
            hits[language] += 1
    best = max(hits, key=hits.__getitem__)  # the first of equals: English, then the dict's order
    return best if hits[best] > 0 else "en"


def stopwords_for(words: list[str]) -> frozenset[str]:
    """The function words to drop from a query made of these (lowercase) words."""
    return BY_LANGUAGE[guess_language(words)]
