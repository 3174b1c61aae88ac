"""English function words dropped from queries: they match everything and rank nothing."""

STOPWORDS = frozenset(
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
