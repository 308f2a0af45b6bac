"""The pattern tables of the offline observer and reflector: what English text looks like.

Mostly data (compiled regular expressions, word sets and small lookup tables), plus the few
matchers that read nothing but these tables: :func:`names`, :func:`key_terms` and
:func:`names_and_numbers` (what must survive condensing), :func:`fact_key` (which attribute a
statement sets), and :func:`statement_priority` (what a user sentence is worth). Nothing here
imports the other offline modules, so every one of them can share these; they decide what to do
with a match. All of it is English-only heuristics.

Sections: user and assistant sentence shapes (small talk, requests, plans, completions),
priority cues (what makes a user statement a durable fact, a dated plan or chatter), pronoun
rewriting, names and quantities, date phrases, the attributes a fact can set, and the matchers.

The priority cues, in short: a statement is 🔴 when it says who the user is, names their people,
home, work, possessions, health, diet or preferences, gives contact details or a budget, records
a decision or a change of state, or carries a dated plan or appointment. Narration of the moment
("heading to the office now"), apologies, reactions and transitions ("let's talk Lisbon") never
are; the observer keeps them as 🟢 only when they name something not yet recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from obsmem.om.offline.known import KnownView
from obsmem.om.text.format import PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM

FILLER_WORDS = frozenset(
    "hi hello hey yo hiya good morning afternoon evening night bye goodbye see you later cheers "
    "thanks thank thx ty ok okay k kk cool nice great awesome perfect sure yes yeah yep yup no nope "
    "nah lol haha hahaha lmao wow oh ah hmm got it sounds makes sense i alright all right fine np "
    "problem you're welcome how are is going things what's up i'm not bad me too same true exactly "
    "indeed so much a lot very again there and doing well today love that this the buddy please "
    "amazing brilliant lovely wonderful excellent appreciate it much :) :( xd omg how's it's what's "
    "anyway you're your day will do doing wbu hbu".split()
)  # fmt: skip
INTERJECTION = re.compile(
    r"^(?:(?:(?:oh|well|so|btw|by the way|also|actually|anyway|anyways|yeah|yes|haha|ha|hmm|ok|okay|"
    r"and|but|plus|then|fyi|hey|hi|hello|ah|morning|good morning|good evening)\b[,!.]?|"
    r"(?:thanks|thank you|great|cool|perfect|nice|right|alright|sure|wait|oops|good point|good catch|"
    r"good idea|noted|agreed|fair enough|makes sense|ugh|wow|oof|phew)[,!.]+)\s+)+",
    re.I,
)
USER_DONE = re.compile(
    r"\b(?:that|it|this)\s+(?:worked|works now|did the trick|fixed it|solved it)\b|"
    r"\b(?:all set|problem solved|it's working now|works now)\b",
    re.I,
)
USER_DONE_SHORT = re.compile(
    r"^(?:ok(?:ay)?,?\s*|great,?\s*)?(?:all\s+)?(?:done|fixed|sent|booked|finished|completed)\b[^?]*$",
    re.I,
)
USER_COMPLETED = re.compile(
    r"^(?:I|We)(?:'ve| have)?\s+(?:just\s+|finally\s+|already\s+)?(?P<rest>(?:booked|sent|bought|"
    r"purchased|ordered|finished|completed|submitted|paid|signed|scheduled|cancell?ed|canceled|"
    r"renewed|fixed|installed|filed|registered|reserved|applied|mailed|returned|uploaded|deployed|"
    r"published)\b.*)$",
    re.I,
)
#: A switch of mind before a decision: "Actually, …", "Change of plan: …", "Scratch that, …".
SWITCH_LEAD = re.compile(
    r"^(?:actually|change of plan|scratch that|on second thought|second thoughts|wait|hmm|no)[,:;.!—-]*\s+", re.I
)
#: The user decides: "Let's go with X", "I'll take X", "X it is", "switch to X instead".
DECISION = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|fine|great|then|so)[,!]?\s+)?(?:"
    r"(?:let's|let us|we'll|I'll|we will|I will|we're going to|I'm going to)\s+(?:go with|take|pick|choose|book|"
    r"switch to|use|stick with)\s+(?P<a>[^,.;!?]{2,60}?)|"
    r"(?:switch|change|go|move)\s+(?:it\s+|that\s+)?(?:to|with)\s+(?P<b>[^,.;!?]{2,60}?)|"
    r"(?:we|I)\s+(?:went|are going|'re going|'m going|am going)\s+with\s+(?P<e>[^,.;!?]{2,60}?)(?:\s+after all)?|"
    r"(?P<c>[^,.;!?]{2,50}?),?\s+it is)(?:\s+instead)?(?=[,.;!?]|$)",
    re.I,
)
#: "Which hotel would you suggest?": what a following decision is about.
CHOICE_TOPIC = re.compile(
    r"^which\s+(?P<k>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)\s+(?:would|should|do|does|is|are|can|to)\b", re.I
)
#: The user reports a task finished, naming it: "The Quarvel report is done, I sent it off",
#: "Finished the packing list, thanks!", "We can close the visa checklist, it's submitted".
TASK_FINISHED = re.compile(
    r"^(?:the|my|our)\s+(?P<a>[^,.;!?]{3,60}?)\s+(?:is|are|was|were|has been|have been)\s+"
    r"(?:now\s+|all\s+|finally\s+)?(?:done|finished|complete|completed|submitted|sent off|wrapped up)\b|"
    r"^(?:(?:I|we)(?:'ve|\s+have)?\s+)?(?:just\s+|finally\s+)?(?:finished|completed|wrapped up)\s+"
    r"(?:the|my|our)\s+(?P<b>[^,.;!?]{3,60})|"
    r"^(?:we|you)\s+can\s+(?:close|mark)\s+(?:the|my|our)\s+(?P<c>[^,.;!?]{3,60}?)(?:\s+as\s+done)?(?=[,.;!?]|$)|"
    r"^(?:I'm|I am|we're|we are)\s+(?:all\s+)?(?:done|finished)\s+with\s+(?:the|my|our)\s+(?P<d>[^,.;!?]{3,60})",
    re.I,
)
REQUEST = re.compile(
    r"^(?:(?:please|pls|kindly)\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?(?P<a>.+)$|"
    r"^(?:please|pls|kindly)[,!]?\s+(?P<b>.+)$|"
    r"^I(?:\s+need|\s+want|\s+would like|'d like)\s+you\s+to\s+(?P<c>.+)$|"
    r"^(?P<d>(?:help me|tell me|show me|give me|remind me|let me know|find|book|write|explain|list|"
    r"recommend|suggest|send|create|make|check|search|look up|translate|summari[sz]e|draft|plan|teach|"
    r"compare|calculate|convert|set up|schedule|order|reserve|cancel|add|update|fix|generate|"
    r"describe|outline|estimate|run|open|read|show|get|move|rename|delete|remove|refactor|"
    r"implement|test|deploy|commit|push|merge|review|count|sort|format|call|text|email|message|"
    r"note|save|track|change|reply|answer|buy|pick|choose|put|mark|set|turn|go ahead|proceed|"
    r"look at|look into|dig into|walk me through|break down|rewrite|shorten|expand|edit|"
    r"polish|proofread|analy[sz]e|debug|investigate|ping|notify|invite)\b(?!:)"
    r"(?!\s+(?:is|are|was|were|went|has|had|looks|seems|will|would|got|did|does)\b).+)$",
    re.I,
)
# An instruction whose verb is not in REQUEST's list ("Go through the page …", "Keep it short",
# "Crawl all pages and summarise"): a first word that is no pronoun, article, auxiliary, time or
# discourse word, then (after an optional particle) an object. Checked after REQUEST and before a
# statement is weighed, so a request is never dropped as a remark that names nothing.
_NOT_A_VERB = (
    r"i|we|you|he|she|it|they|this|that|these|those|there|here|the|a|an|my|our|your|his|her|their|its|"
    r"some|any|all|every|each|both|no|not|none|what|which|where|when|who|why|how|whose|if|and|but|or|so|"
    r"because|since|then|now|today|tonight|yesterday|tomorrow|also|maybe|perhaps|just|still|again|"
    r"sometimes|usually|always|never|actually|honestly|basically|anyway|well|oh|hmm|yes|no|ok|okay|"
    r"thanks|thank|sorry|hello|hi|hey|is|are|was|were|am|be|been|do|does|did|have|has|had|can|could|"
    r"should|would|will|shall|may|might|must|let's|lets|sounds|seems|looks|everything|nothing|"
    r"something|someone|everyone|nobody|one|two|three|last|next|first|yesterday's|today's|even|"
    r"really|only|already|almost|mostly|probably|definitely|finally|later|earlier|once|twice|back"
)
IMPERATIVE = re.compile(
    rf"^(?!(?:{_NOT_A_VERB})\b)"
    r"(?!(?!bring|sing|ring|swing|sting|string)[a-z-]+ing\b)(?![a-z-]+[^e]ed\b)"  # "Running the …", "Watched the …"
    r"(?P<x>[a-z][a-z-]{1,20}\s+"
    r"(?:(?:through|over|into|out|up|down|back|on|off|about|with|around|across|along)\s+)?"
    r"(?:the|a|an|all|every|each|it|them|this|that|these|those|my|our|your|me|us|some|any|both|"
    r"everything|anything)\b[^?]*)$",
    re.I,
)
HOW_DO_I = re.compile(r"^how\s+(?:do|can|should|would|could)\s+(?:I|we)\s+(?P<x>.+?)\??$", re.I)
WH = re.compile(r"^(?:what|what's|which|where|where's|when|who|who's|whom|whose|why|how|how's)\b", re.I)
AUX = re.compile(
    r"^(?:is|are|am|was|were|do|does|did|can|could|should|would|will|shall|may|might|has|have|"
    r"isn't|aren't|don't|doesn't|didn't|can't|won't)\b",
    re.I,
)
WONDER = re.compile(
    r"^I(?:'m| am| was)?\s+(?:wonder(?:ing)?|want to know|would like to know|'d like to know)\s+"
    r"(?:if|whether)\s+(?P<x>.+?)\??$",
    re.I,
)
CONTRACTIONS = tuple(
    (re.compile(p, re.I), r)
    for p, r in (
        (r"\bI'll\b", "I will"), (r"\bI'm\b", "I am"), (r"\bI'd like\b", "I would like"),
        (r"\bwe'll\b", "we will"), (r"\bwe're\b", "we are"), (r"\bwe'd like\b", "we would like"),
    )
)  # fmt: skip
PLAN_LEAD = re.compile(
    r"^(?P<subj>I|We)\s+(?P<aux>will|am going to|are going to|plan to|am planning to|are planning to|"
    r"intend to|want to|would like to|need to|have to|must|hope to|am hoping to|are hoping to|"
    r"am looking forward to|are looking forward to)\s+(?P<rest>.+)$",
    re.I,
)
PLAN_VERB = {
    "will": "plans to", "going": "plans to", "plan": "plans to", "planning": "plans to",
    "intend": "plans to", "want": "wants to", "would": "wants to", "need": "needs to",
    "have": "needs to", "must": "needs to", "hope": "hopes to", "hoping": "hopes to",
    "looking": "is looking forward to",
}  # fmt: skip
VAGUE_PLAN = re.compile(
    r"^(?:think about it|let you know|check|see|try|get back to you|look into it|do that|"
    r"consider it|keep that in mind|keep you posted|figure it out)\b",
    re.I,
)
# -- priority cues for user statements (read by statement_priority below) -------------------
# 🔴 is for what stays true and is about the user: who they are, their people, home and work,
# possessions, health and diet, preferences, contact details, budgets, decisions, changes of
# state, and dated plans or appointments. Everything else a user narrates is 🟢 or nothing.

_PEOPLE = (
    r"partner|wife|husband|spouse|girlfriend|boyfriend|fianc[ée]e?|daughter|son|kids?|children|child|"
    r"baby|mum|mom|mother|dad|father|parents|sister|brother|siblings?|grand(?:ma|pa|mother|father|"
    r"parents|children|kids)|aunt|uncle|cousin|niece|nephew|(?:mother|father|sister|brother)-in-law|"
    r"in-laws|dog|cat|pets?|puppy|kitten|manager|boss|colleague|co-?worker|landlord|neighbou?r|"
    r"friend|teacher|doctor|therapist|dentist|flatmate|roommate"
)
_HOME_WORK = (
    r"job|title|role|position|employer|company|team|office|salary|rent|flat|apartment|house|home|"
    r"address|neighbou?rhood|commute|car|bike|laptop|phone|number|e-?mail|diet|budget|hometown"
)
_HEALTH = (
    r"allerg\w*|intoleran\w*|vegetarian|vegan|pescatarian|gluten|lactose|diabet\w*|asthma|epipen|"
    r"medication|celiac|kosher|halal"
)
_WEEKDAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_CAP = r"(?-i:[A-Z])"  # a capital letter even inside a case-insensitive pattern
_NAMED = rf"{_CAP}[\w'-]{{0,40}}"  # a capitalised word (bounded: linear time on any input)
_ME = r"\b(?:I|we|my|our|me|us)\b"
_CUES = {
    "identity": (  # who the user is, where from, how old; a person or thing named and described
        r"\bmy\s+(?:full\s+|first\s+|last\s+|nick)?name\b|\bcall\s+me\b|\bI\s+am\s+from\b|"
        r"\bI\s+am\s+(?:an?\s+(?!bit\b|little\b|lot\b|mess\b)|based|married|single|divorced|engaged|"
        r"pregnant|retired|learning|studying|training|left-handed|colou?r-?blind|deaf|\d)|"
        rf"\bI\s+am\s+{_CAP}[a-z]+\s+{_CAP}|\bpromoted\b|"
        r"\b(?:grew up|was born|were born|raised in|years?\s+old|year-old|turns?\s+\d+|birthday)\b|"
        r"\b(?:is|am|are)\s+\d+\s?(?:cm|m|kg|kilos?|years?)\b|"
        rf"(?:^|[,;]\s+){_NAMED}\s+(?:is|was)\s+(?:an?|our|my)\s+(?!bit\b|little\b|lot\b)|"
        rf"\b(?:is|are)\s+(?:called\s+|named\s+)?{_NAMED}(?:\s+{_NAMED})*\s*(?:[,.;]|$)|"
        r"\b(?:is|it's|it is)\s+an?\s+(?:[\w-]+\s+){0,2}(?:service|app|application|library|framework|"
        r"platform|project|system|product|tool)\b"
    ),
    "people": (  # their family, pets and the people around them
        rf"\b(?:I|we)\s+(?:also\s+)?(?:have|has|got)\s+(?:an?|two|three|four|\d+)\s+(?:[\w-]+\s+)?"
        rf"(?:{_PEOPLE})\b|"
        rf"\b(?:my|our|his|her)\s+(?:[\w-]+\s+){{0,2}}(?:{_PEOPLE})\s*,?\s+"
        rf"(?:{_CAP}|is\b|are\b|called\b|named\b)|"
        rf"{_NAMED},\s+(?:my|our)\s+(?:{_PEOPLE})\b"
    ),
    "home and work": (  # where they live and work; what they own and use
        r"\b(?:live|lives|living|based|settled)\s+in\b|"
        r"\b(?:move[ds]?|moving|relocat\w*)\s+(?:back\s+)?(?:to|from)\b|"
        r"\b(?:work|works|working)\s+(?:as|at|for|in)\b|\bnew\s+job\b|\bhired\b|\bresign\w*|"
        r"\b(?:my|our)\s+(?:new\s+|old\s+|current\s+|personal\s+|work\s+|home\s+)?"
        rf"(?:{_HOME_WORK})\s+(?:[\w-]+\s+){{0,2}}?(?:is|are)\b|"
        r"\b(?:the|my|our)\s+(?:new\s+)?(?:flat|apartment|house|home|office)\s+is\s+(?:in|on|near|at)\b|"
        rf"\b(?:I|we)\s+(?:own|drive)\b|\b(?:my|our)\s+(?:new\s+|old\s+)?{_CAP}[\w-]*(?:\s+{_CAP}[\w-]*)*"
        r"(?!\s+(?-i:[a-z])|[\w-])|"
        r"\b(?:I|we)\s+(?:also\s+)?have\s+(?:an?|two|three|\d+)\s+"
        r"(?!(?:[\w-]+\s+)?(?:minutes?|hours?|seconds?|days?|weeks?)\b)|"
        r"\b(?:I|we)\s+(?:use|are using|run|host)\s+\w"
    ),
    "health and diet": (  # about the user, or what someone eats
        rf"{_ME}[^.;]{{0,80}}?\b(?:{_HEALTH})\b|\b(?:allergic|intolerant)\s+to\b|"
        rf"\b(?:I|we|he|she|{_NAMED})\s+(?:only\s+|mostly\s+|never\s+)?(?:eat|eats|drink|drinks)\b"
    ),
    "preferences and habits": (
        r"\b(?:prefer|prefers|favou?rite)\b|"
        r"\b(?:I|we)\s+(?:always|never|usually|normally|often|rarely)\s+(?!forget|remember|say|\w+ed\b)\w|"
        rf"\b(?:I|we|he|she|{_NAMED})\s+(?:really\s+|also\s+|absolutely\s+)?(?:like|likes|love|loves|"
        r"hate|hates|dislike|dislikes|enjoy|enjoys|adore|adores|can't stand|don't like|doesn't like)\b|"
        rf"\bevery\s+(?:day|morning|evening|night|week|weekend|month|year|{_WEEKDAYS})\b|"
        rf"\b(?:{_WEEKDAYS}|weekend)s\b|\b(?:{_WEEKDAYS})\s+(?:mornings|afternoons|evenings|nights)\b|"
        r"\b(?:a|per)\s+(?:day|week|month|year)\b|\b(?:daily|weekly|monthly)\b"
    ),
    "contact and money": (
        r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}\.\w|\+\d[\d\s-]{6,20}\d|\bphone\s+number\b|"
        r"\bbudget\b|\bsalary\b|\brent\b|\bmortgage\b|\bdeposit\b|\bsurprise\b|\bsecret\b"
    ),
    "decisions and changes": (
        r"\b(?:I|we)\s+(?:\w+\s+)?(?:decided|chose|opted|settled on|go with|are going with)\b|"
        r"\bdecision\b|\bapproved\b(?!\s+of)|\bchanged\s+(?:the|our|my|their)\s+(?:plan|mind)\b|"
        r"\b(?:I|we|my|our)\s+(?:[\w'-]+\s+){0,3}?(?:moved|switched|changed|quit|stopped|started|became)\b|"
        r"\bno\s+longer\b|\bused\s+to\b|\bcorrection\b|"
        rf"\b(?:is|are|it's|it is)\s+now\s+(?:on\s+|at\s+|in\s+)?(?:[\d$€£+]|{_CAP})|,\s+not\s+{_CAP}"
    ),
}
DURABLE = re.compile("|".join(f"(?:{cue})" for cue in _CUES.values()), re.I)
IDENTITY = re.compile(  # who the user is: outranks every other fact when a line must be cut
    rf"\bmy\s+(?:full\s+)?name\s+is\b|\bcall\s+me\b|\bI\s+am\s+{_CAP}[a-z]+\s+{_CAP}", re.I
)
CHOICE = re.compile(r"^['\"]?[^,.;]{1,40}?['\"]?,?\s+it is\b", re.I)  # "15:02 it is, booked …"
CHATTER = re.compile(  # narration of the moment and transitions: never a dated plan
    r"^(?:going to (?:sleep|bed)|heading|leaving|off to|lunch|dinner|back to|back at|back from|"
    r"where were we|continuing|good night|bye|work mode|time for)\b|\bgoing to (?:sleep|bed)\b|"
    r"\bwish me luck\b",
    re.I,
)
FUTURE_SURE = re.compile(  # the future that a plan or appointment is phrased in
    rf"\b(?:will|shall|going to|gonna|tomorrow|upcoming|coming up)\b|'ll\b|\bnext\s+(?:week|month|"
    rf"year|weekend|{_WEEKDAYS})\b|\bin\s+\d+\s+(?:days|weeks|months)\b|\b(?:starts?|begins?|comes)\b",
    re.I,
)
APPOINTMENT = re.compile(
    r"\b(?:appointment|review|meeting|call|interview|dentist|doctor|vet|flights?|train|trip|party|"
    r"dinner|birthday|lesson|class|course|workshop|trial day|deadline|check-in|technician|movers?|"
    r"handover|sync|demo|sprint|booked|booking|reservation|visit|concert|wedding|exam|surgery|"
    r"holiday|vacation|conference|registration|due)\b",
    re.I,
)
CLOCK_OR_DAY = re.compile(
    rf"\b(?:at|from|until|by)\s+\d{{1,2}}(?::\d{{2}})?\b|\b\d{{1,2}}:\d{{2}}\b|\b(?:{_WEEKDAYS})\b", re.I
)
THIRD_WILL = re.compile(rf"{_NAMED}(?:\s+and\s+{_NAMED})?\s+(?:will|is going to|are going to)\b")
LEAD_IN = re.compile(  # "Quick intro since this is a fresh setup: …"
    r"^(?=[^:]*\b(?:intro|introduction|update|news|question|note|reminder|report|context|correction|"
    r"important|fyi|admin|status)\b)[^:\d]{3,70}:\s+(?=\S)",
    re.I,
)
FIRST_SUBJECT = re.compile(r"^(?:[\w,'-]+\s+){0,3}?(?:I|we)\b(?!')", re.I)  # "Yesterday I ran …"
GOAL = re.compile(r"\b(?:learn|learning|become|study|improve|master)\b", re.I)
LABEL = re.compile(r"^(?:[\w'-]+\s){0,3}[\w'-]+:\s+(?=\S)")  # "Update: …", "Question for later: …"
DONE_LEAD = re.compile(
    r"^(?:done|all set|great news|good news|perfect|success|great|alright)\s*[!.,:—-]+\s*", re.I
)
ASSIST_FILLER = re.compile(
    r"^(?:sure|of course|certainly|absolutely|(?:that's )?(?:a )?(?:really )?(?:great|good) question|"
    r"happy to help|done|"
    r"I'd be (?:happy|glad) to(?: help)?|glad to help|no problem|you're welcome|here's what|"
    r"let me know|(?:I )?hope (?:this|that) helps|feel free|is there anything else|anything else|"
    r"good luck|enjoy|have a (?:great|nice|good|wonderful)|thanks for|thank you for|great|awesome|"
    r"perfect|sounds good|got it|okay|ok|hello|hi|hey|how can I help|what can I do for you|"
    r"I'm doing (?:well|great|good)|I'm (?:glad|happy) to hear)\b",
    re.I,
)
PLEASANTRY = re.compile(  # a sentence containing one of these is padding, whatever its length
    r"\b(?:great question|good question|glad you asked|happy to help|hope (?:this|that) helps|"
    r"don't hesitate|let me know if|feel free to|it was my pleasure|any time you have|"
    r"have a (?:great|nice|good|wonderful|lovely) (?:day|time|trip))\b",
    re.I,
)
ASSIST_DONE = re.compile(
    r"^(?:(?:done|all set|great news|good news|perfect|success|great|alright)\s*[!.,:—-]+\s*)?"
    r"(?:I(?:'ve| have)?\s+(?:just\s+|now\s+|successfully\s+|also\s+)?(?:booked|sent|scheduled|"
    r"created|ordered|cancell?ed|canceled|updated|added|saved|set up|reserved|submitted|paid|"
    r"renewed|moved|deleted|removed|fixed|installed|deployed|published|shared|emailed|invited|"
    r"registered|confirmed|completed|finished|changed|written|drafted|rescheduled)\b|"
    r"(?:your|the)\s+[\w\s'-]{1,60}?\s+(?:is|has been|was|are|have been)\s+(?:now\s+|successfully\s+)?"
    r"(?:booked|sent|scheduled|created|confirmed|reserved|cancell?ed|canceled|updated|saved|"
    r"submitted|paid|renewed|deployed|completed|fixed|done)\b)",
    re.I,
)
RECOMMEND = re.compile(
    r"\b(?:I(?:'d| would)? (?:recommend|suggest)|you (?:should|could try|might want to|may want to)|"
    r"consider\s+\w+ing|my (?:recommendation|suggestion|advice)|the best (?:option|choice|bet)|I'd go with|"
    r"go with|let's go with|let's use|we'll use|we'll go with|I'll use|decided to|the plan is)\b",
    re.I,
)
LOWER_OK = frozenset("a an the it he she his her this that these those there both our their its".split())
CODE_DEF = re.compile(
    r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|function|fn|func|interface|struct)\s+(\w+)"
)
STOPWORDS = frozenset(
    "the and for with that this what which when where who why how you your yours they them their "
    "there then than have has had are was were will would could should can may might must shall "
    "from into onto about over under after before again also just only very really much many more "
    "most some any all each every other another such own same been being does did doing done "
    "want need like love hate know think get got make made going goes take took give gave tell told "
    "help please thanks thank hello okay sure yes not but its it's i'm i've i'll i'd let let's me my "
    "mine our ours we us him his her hers she he one two three next last week month year today "
    "tomorrow yesterday friday monday tuesday wednesday thursday saturday sunday weekend time day "
    "days good great nice new old way lot bit thing things something anything everything stuff "
    "maybe still even well back now here see look find book plan plans ask asked say said".split()
)  # fmt: skip

THIRD_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"\b[Ii]'m\b", "they are"),
        (r"\b[Ii] am\b", "they are"),
        (r"\b[Aa]m [Ii]\b", "are they"),
        (r"\b[Ii]'ve\b", "they have"),
        (r"\b[Ii]'ll\b", "they will"),
        (r"\b[Ii]'d\b", "they would"),
        (r"\b[Ii] was\b", "they were"),
        (r"\b(was) [Ii]\b", "were they"),
        (r"(?<![\w.'])[Ii](?![\w.'])", "they"),
        (r"\b[Mm]yself\b", "themselves"),
        (r"\b[Mm]y\b", "their"),
        (r"\b[Mm]ine\b", "theirs"),
        (r"\bme\b", "them"),
        (r"\b[Ww]e're\b", "they are"),
        (r"\b[Ww]e've\b", "they have"),
        (r"\b[Ww]e'll\b", "they will"),
        (r"\b[Ww]e'd\b", "they would"),
        (r"\b[Ww]e\b", "they"),
        (r"\b[Oo]urselves\b", "themselves"),
        (r"\b[Oo]urs\b", "theirs"),
        (r"\b[Oo]ur\b", "their"),
        (r"\bus\b", "them"),
    )
)
ASSISTANT_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"\b[Yy]ou're\b", "the user is"),
        (r"\b[Yy]ou've\b", "the user has"),
        (r"\b[Yy]ours\b", "the user's"),
        (r"\b[Yy]our\b", "the user's"),
        (r"\b[Yy]ou\b", "the user"),
        (r"\b[Ii]'ll\b", "Assistant will"),
        (r"\b[Ii]'m\b", "Assistant is"),
        (r"\b[Ii]'ve\b", "Assistant has"),
        (r"\b[Ii] have\b", "Assistant has"),
        (r"(?<![\w.'])I(?![\w.'])", "Assistant"),
        (r"\bmy\b", "its"),
        (r"\bme\b", "the assistant"),
        (r"\b[Ll]et's\b", "they will"),
    )
)

NAME = re.compile(
    r"\b[A-Z][\w'&-]*(?:(?:\s(?:of|de|da|das|do|dos|di|del|der|du|van|von|la|le|the|and|&))?\s[A-Z][\w'&-]*)*"
)
SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[-*•]\s+)$")
#: A number's digits and separators, read possessively and at most 40 at a time: a run of
#: "1,1,1,…" is then scanned once per start, not once per start and per separator.
_FIGURE = r"\d[\d,.]{0,40}+"
QUANTITY = re.compile(
    rf"[$€£]\s?{_FIGURE}(?:\s?[kKmM]\b)?"
    rf"|\b{_FIGURE}(?:\s?(?:-|–|to)\s?{_FIGURE})?\s?(?:%|°\s?[CF]?\b|°"
    r"|(?:EUR|USD|GBP|CHF|euros?|dollars?|pounds?|km/h|km|mi|miles?|kg|lbs?|g|m|cm|mm|ml|l|GB|MB|TB|"
    r"hours?|hrs?|h|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|people|persons?|"
    r"guests?|nights?|pm|am|AM|PM|x)\b)"
    r"|\b\d{1,2}:\d{2}(?:\s?[ap]m\b)?"
)
NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d(?![\w])|(?<![\w.])\d(?![\w.,])")
NOT_NAMES = frozenset(
    "I I'm I've I'll I'd OK Ok User Assistant In The A An It It's This That These Those My Your Our "
    "We You He She They On At For And But So If When What How Why Where Who Which Here There Also "
    "Then Yes No Sure Great Thanks Thank Please Just Let Let's Hi Hello Hey Done Perfect Note".split()
)  # fmt: skip

_N = r"(?P<n>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
RELATIVE_DAY = re.compile(
    r"\b(?P<w>the day after tomorrow|the day before yesterday|tomorrow|yesterday)\b", re.I
)
AGO = re.compile(rf"\b{_N} (?P<unit>day|week|month|year)s? ago\b", re.I)
IN_N = re.compile(rf"\bin {_N} (?P<unit>day|week|month|year)s?\b", re.I)
WEEKDAY = re.compile(
    r"\b(?:(?P<mod>next|last|this|this coming|coming|on)\s+)?"
    r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.I,
)
PERIOD = re.compile(r"\b(?P<mod>next|last|this)\s+(?P<unit>weekend|week|month|year)\b", re.I)
_MON = (
    r"(?P<mon>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
MONTH_DAY = re.compile(rf"\b{_MON}\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)(?:,?\s+(?P<y>\d{{4}}))?")
DAY_MONTH = re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\b(?:,?\s+(?P<y>\d{{4}}))?")
MONTH_ONLY = re.compile(
    r"\b(?P<mod>in|during|by|until|since|this|next|last|early|mid|late|end of|beginning of)\s+"
    r"(?P<mon>January|February|March|April|May|June|July|August|September|October|November|December)"
    r"\b(?!\s+\d)(?:,?\s+(?P<y>\d{4}))?"
)
FUTURE = re.compile(
    r"\b(?:will|shall|going to|gonna|plan|plans|planning|want|wants|need|needs|hope|hoping|"
    r"intend|intends|tomorrow|next|upcoming|coming|looking forward|scheduled|booked for)\b|'ll\b|"
    r"\b(?:am|are)\s+\w+ing\b|'(?:m|re)\s+\w+ing\b|\bin \d+ \w+s?\b",
    re.I,
)
PAST = re.compile(
    r"\b(?:was|were|went|did|had|got|visited|saw|met|came|bought|left|arrived|ago|yesterday|"
    r"last|took|made|told|said|flew|drove|moved|started|finished|spent|celebrated|attended|"
    r"returned|happened|called|joined|quit|graduated|lost|won|ate|ran|rang)\b",
    re.I,
)
PRESENT = re.compile(  # a clause in the present tense: a bare weekday in it is the coming one
    r"\b(?:is|are|am|isn't|aren't|now)\b|\b(?:it|that|this|there|which)'s\b", re.I
)
REPORTED = re.compile(  # "I told her I would come on Friday": a future seen from an unknown past
    r"\b(?:would|'d)\b(?!\s+(?:like|love|prefer|rather)\b)", re.I
)
RESCHEDULE = re.compile(  # a date after "moved/pushed/postponed … to" is the new date: still ahead
    r"\b(?:mov(?:e|es|ed|ing)|push(?:es|ed|ing)?|postpon\w*|reschedul\w*|delay(?:s|ed|ing)?|"
    r"shift(?:s|ed|ing)?|bump(?:s|ed|ing)?|put\s+off|brought\s+forward|pulled\s+forward|"
    r"defer(?:s|red|ring)?|chang(?:e|es|ed|ing))\b",
    re.I,
)
RESCHEDULED_TO = re.compile(r"\b(?:to|until|till|til|for|from)\s+(?:the\s+)?(?:coming\s+)?$", re.I)
RECURRING_DATE = re.compile(  # unless said of the future, a yearless date here has no known year
    r"\b(?:born|birth|birthdays?|b-?day|anniversar(?:y|ies)|name\s?day|died|passed\s+away|married)\b",
    re.I,
)
YEARLY = re.compile(  # a yearless date that recurs every year
    r"\b(?:annual(?:ly)?|yearly)\b|"
    r"\b(?:every|each)\s+(?:year|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
    re.I,
)
UNSPECIFIC_WEEKDAY = re.compile(  # "on a Friday", "every Friday", "the Friday (after …)"
    r"\b(?:a|an|one|the|every|each|other|following|same|any)\s+$", re.I
)
NOT_ONE_WEEKDAY = re.compile(  # "Friday after the launch", "on Tuesday evenings" (every week)
    r"\s+(?:(?:after|before)\s+(?:the|next|last|that|this|our|my|his|her|their)\b|"
    r"(?:mornings|afternoons|evenings|nights)\b)",
    re.I,
)
CLAUSE_EDGE = re.compile(r"[,;:—–]\s*+|(?<!\s)\s++(?:and|but|so|because|while|whereas)\s++", re.I)

STOP_VALUE = re.compile(
    r"\s(?:and|but|because|since|so|with|for|from|last|next|this|in|on|at|by|yesterday|tomorrow|"
    r"now|recently|until|when|while|as|which|who|where|after|before|instead|starting|anymore|every|each|"
    r"because|since|daily|weekly)\b",
    re.I,
)
_V = r"(?P<v>[^,;!?()]+)"
_OLD = r"(?:from\s+(?P<old>[^,;!?()]+?)\s+)?"
_K = r"(?P<k>[^,;!?()]+)"
_ATTR = (
    r"(?P<k>favou?rite\s+[\w-]+(?:\s+[\w-]+)?|[\w-]+(?:'s|s')\s+name|(?:first\s+|last\s+|full\s+|"
    r"middle\s+|nick)?name|e-?mail(?:\s+address)?|phone(?:\s+number)?|(?:home\s+)?address|birthday|"
    r"date of birth|age|job(?:\s+title)?|title|role|position|occupation|profession|employer|company|"
    r"budget|goal|deadline|time\s?zone|salary|rent|diet|hometown|home\s+town|city|country|"
    r"(?:native|first)\s+language|manager|boss|team|username|handle|website|car|editor|"
    r"operating system|laptop|shoe size|height|weight|blood type|pronouns)"
)
#: An open-ended attribute: one to four words, "budget for the trip", "preferred airline".
_GV = r"(?P<v>(?:[^,;!?()]|,(?=\d{3}))+)"  # a value; "€1,350" keeps its thousands
_GATTR = r"(?P<k>[a-z][\w-]*(?:\s+(?:for|of)\s+(?:the\s+)?[a-z][\w-]*|\s+[a-z][\w-]*){0,3}?)"
USER_SUBJECT = re.compile(
    r"\b(?:they|User)\s+(?:\(with others\)\s+)?(?:(?:now|still|currently|also|both|all|just|"
    r"recently|finally|have|had|will|would|are|were|plans? to|wants? to|needs? to|hopes? to|"
    r"is going to|are going to|no longer|not|never|don't|do not|"
    r"[a-z]+ly)\s+){0,3}$",
    re.I,
)
NEGATION = re.compile(r"\b(?:no longer|not|don't|do not|doesn't|never|stopped)\s+\w*\s*$", re.I)
KEY_PATTERNS: tuple[tuple[str | None, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern, re.I))
    for key, pattern in (
        (None, rf"\b(?:switched|changed|updated|moved)\s+their\s+{_ATTR}\s+{_OLD}to\s+{_V}"),
        (None, rf"\btheir\s+{_ATTR}\s+(?:is|are|has changed to|changed to)\s+(?:now\s+|still\s+)?{_V}"),
        ("residence", rf"\b(?:live|lives|living|reside|resides|residing|based|settled)\s+in\s+{_V}"),
        ("residence", rf"\b(?:move[ds]?|moving|relocat(?:ed|ing|e))\s+(?:back\s+)?{_OLD}to\s+{_V}"),
        ("employer", rf"\b(?:quit|left)\s+their\s+job\s+at\s+{_V}"),
        ("employer", rf"\b(?:switched|changed)\s+jobs?\s+{_OLD}to\s+{_V}"),
        ("employer", rf"\b(?:work|works|working|worked)\s+(?:at|for)\s+{_V}"),
        ("employer", rf"\b(?:joined|started\s+(?:working\s+)?at|started\s+a\s+(?:new\s+)?job\s+at|"
                     rf"took\s+a\s+job\s+at|got\s+a\s+job\s+at)\s+{_V}"),
        # "their sister is called Ilvana" names the sister, not the user: the key says whose name
        (None, rf"\btheir\s+(?P<k>[\w-]+(?:\s+[\w-]+)?)\s+(?:is|are)\s+(?:called|named)\s+{_V}"),
        ("name", rf"\bthey\s+are\s+(?:called|named)\s+{_V}"),
        ("choice", r"\bchose\s+(?P<v>[^,;!?()]+?)\s+for\s+the\s+(?P<k>[^,;!?()]+?)(?=\s*\(|[.,;]|$)"),
        ("tool for", rf"\b(?:use[sd]?|using|switched\s+{_OLD}to)\s+(?P<v>[^,;!?()]+?)\s+for\s+{_K}"),
        # Any attribute at all, when its value is concrete (a name, a number, an address): "the
        # budget for the trip is €1,350", "use X as their phone number from now on", "new
        # deployment region: eu-3". A later value of the same attribute supersedes the earlier.
        ("*", rf"\b(?:switched|changed|updated|set)\s+(?:their|the|our)\s+{_GATTR}\s+{_OLD}to\s+{_GV}"),
        ("*", rf"\b(?:their|the|our)\s+{_GATTR}\s+(?:changed|has changed)\s*,?\s*(?:it(?:'s|\s+is)\s+)?"
              rf"(?:now\s+)?(?:to\s+)?{_GV}"),
        ("*", rf"\buse\s+(?P<v>(?:[^,;!?()]|,(?=\d{{3}}))+?)\s+as\s+(?:their|the|our)\s+{_GATTR}(?=\s+(?:from now|going forward|starting)\b|[,.;!?]|$)"),
        ("*", rf"\bnew\s+{_GATTR}:\s*{_GV}"),
        # "Budget for the whole trip is €2,400": the attribute opens the statement
        ("*", rf"^User stated\s+(?P<k>(?-i:[A-Z])[a-z][\w-]*(?:\s+[a-z][\w-]*){{0,4}}?)\s+(?:is|are)\s+(?:now\s+)?{_GV}"),
        ("*", rf"\b(?:their|the|our)\s+{_GATTR}\s+(?:is|are)\s+(?:now\s+|still\s+)?{_GV}"),
    )
)  # fmt: skip
#: A concrete value, the only kind the open-ended attribute patterns accept: a capitalised word,
#: a digit, an address or an amount ("Nurugau Air", "€1,350", "a.b@c.example", "eu-west-3").
_EMAIL_VALUE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE_VALUE = re.compile(r"\+?\d[\d ()./-]{6,}\d")
_CONCRETE = re.compile(r"\d|@|[€$£]|\b[A-Z][a-z]")
STATE_OBJECT = re.compile(
    r"^User (?:decided on|chose)\s+(?P<d>[^,;!?()]+?)(?:\s+for\s+the\s+[^,;!?()]+)?\.?$|"
    r"^User stated they (?:now\s+)?(?:use|have|own|drive|prefer|like|love|eat|play|are on|are using|"
    r"are a|are an|are)\s+(?P<v>[^,;!?()]+)",
    re.I,
)
PLAN = re.compile(
    r"^User (?:plans|wants|needs|hopes|intends|is looking forward|is planning|is going)\b|"
    r"\b(?:will|going to|plans? to|planning to|want to|wants to|need to|needs to|hope to)\b",
    re.I,
)


# ----------------------------------------------------------------------------------------------
# Matchers that read only these tables: names and quantities, fact keys, statement priority
# ----------------------------------------------------------------------------------------------


def names(text: str) -> list[str]:
    """Capitalised names (people, places, organisations), not counting sentence-initial words."""
    found: list[str] = []
    seen: set[str] = set()
    for match in NAME.finditer(text):
        words = match.group(0).split()
        first = next((i for i, word in enumerate(words) if word not in NOT_NAMES), len(words))
        last = next((i for i in range(len(words) - 1, first - 1, -1) if words[i] not in NOT_NAMES), first - 1)
        words = words[first : last + 1]  # without "The …" before and "Maybe I", "Then I" after
        starts = match.group(0).startswith(words[0]) if words else False
        if len(words) == 1 and starts and _opens_sentence(text, match.start()):
            continue  # a lone capitalised word opening a sentence is usually not a name
        token = " ".join(words).rstrip("'-&")
        if token and token not in NOT_NAMES and token not in seen:
            seen.add(token)
            found.append(token)
    return found


def _opens_sentence(text: str, start: int) -> bool:
    """True when ``start`` opens a sentence (:data:`SENTENCE_START` before it), looking back at
    most 80 characters, so that finding every name in a text stays linear in its length."""
    return bool(SENTENCE_START.search(text[max(0, start - 80) : start]))


def key_terms(text: str) -> list[str]:
    """Names and quantities (amounts, times, measures): what must survive condensing."""
    amounts = list(dict.fromkeys(match.group(0).strip() for match in QUANTITY.finditer(text)))
    inside = _letter_substrings(amounts)
    return [n for n in names(text) if len(n) > 1 and n not in inside] + amounts


def _letter_substrings(tokens: list[str]) -> set[str]:
    """Every substring of every token that starts with a letter: the names a token contains.

    A quantity is at most about a hundred characters (:data:`_FIGURE` is bounded) with a few
    letters (its unit), so this set is small, and asking whether a name lies inside some
    quantity costs one lookup, not a scan of all of them. A name never spans two quantities:
    after the space that would join them comes a digit or a currency sign, never a capital.
    """
    found: set[str] = set()
    for token in tokens:
        for i, char in enumerate(token):
            if char.isalpha():
                found.update(token[i:j] for j in range(i + 1, len(token) + 1))
    return found


_NUMBER_RUN = re.compile(r"[\d,.]+")
_SHORT_RUN = 64


def task_mentioned(task: str, text: str) -> bool:
    """Whether ``text`` is about the finished ``task``: its names when it has any ("the Quarvel
    report" → Quarvel), else its words in order."""
    called = names(f"finished the {task}")  # a name opening ``task`` is still a name
    lowered = text.lower()
    if called:
        return all(re.search(rf"\b{re.escape(n.lower())}\b", lowered) for n in called)
    return f" {task.lower()}" in f" {lowered}"


_WORD = re.compile(r"\w+")


class TaskMentions:
    """:func:`task_mentioned` for many finished tasks and many texts, with the same answers.

    Each task's names are read once, and a text is checked only against the tasks whose first
    name's first word is one of its words (a name matched within word boundaries starts with
    a whole word of the text), plus those that name nothing: asking every task of every text,
    names read again each time, was quadratic in a batch of reported tasks."""

    def __init__(self, tasks: list[str]) -> None:
        self.tasks = tasks
        self._patterns: list[list[re.Pattern[str]] | None] = []  # None: no name, words in order
        self._by_word: dict[str, list[int]] = {}
        self._always: list[int] = []
        for index, task in enumerate(tasks):
            called = [n.lower() for n in names(f"finished the {task}")]
            self._patterns.append([re.compile(rf"\b{re.escape(n)}\b") for n in called] if called else None)
            first = _WORD.match(called[0]) if called else None
            if first is None:
                self._always.append(index)
            else:
                self._by_word.setdefault(first.group(0), []).append(index)

    def mentioned_in(self, text: str) -> list[int]:
        """The indexes of the tasks ``text`` is about, ascending."""
        lowered = text.lower()
        candidates = set(self._always)
        for word in set(_WORD.findall(lowered)):
            candidates.update(self._by_word.get(word, ()))
        found: list[int] = []
        for index in sorted(candidates):
            patterns = self._patterns[index]
            if patterns is None:
                if f" {self.tasks[index].lower()}" in f" {lowered}":
                    found.append(index)
            elif all(pattern.search(lowered) for pattern in patterns):
                found.append(index)
        return found


def names_and_numbers(text: str) -> list[str]:
    """:func:`key_terms` plus any other number: the signal that a sentence carries facts."""
    found = key_terms(text)
    # A number lies inside a term only within one run of digits and separators of that term.
    # Every digit-to-digit piece of a short run is indexed once, so that asking costs a lookup;
    # only the (rare, pathological) longer runs are searched.
    pieces: set[str] = set()
    long_runs: list[str] = []
    for term in found:
        for run in _NUMBER_RUN.finditer(term):
            piece = run.group(0)
            if len(piece) > _SHORT_RUN:
                long_runs.append(piece)
                continue
            digits = [i for i, char in enumerate(piece) if char.isdigit()]
            pieces.update(piece[i : j + 1] for n, i in enumerate(digits) for j in digits[n:])
    longer = "|".join(long_runs)
    inside: dict[str, bool] = {}
    for match in NUMBER.finditer(text):
        number = match.group(0)
        if number not in inside:
            inside[number] = number in pieces or bool(longer) and number in longer
        if not inside[number]:
            found.append(number)
    return found


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z][a-z'-]{2,}", text.lower()) if w not in STOPWORDS]


@dataclass(frozen=True, slots=True)
class FactKey:
    """An attribute a statement sets: ``key`` ("residence", "favourite colour"), its new
    ``value`` ("" when the statement negates it) and the ``old`` value when stated."""

    key: str
    value: str
    old: str | None = None


def _clip(raw: str | None) -> str:
    if not raw:
        return ""
    raw = re.split(r"\.(?:\s|$)", raw, maxsplit=1)[0]
    stop = STOP_VALUE.search(raw)
    if stop:
        raw = raw[: stop.start()]
    raw = re.sub(r"^(?:the|a|an)\s+", "", raw.strip(), flags=re.I)
    return raw.strip(" .'\"")


#: Names of one attribute said several ways ("email" / "email address"): one key, so either
#: supersedes the other.
_KEY_SYNONYMS = {"email address": "email", "phone number": "phone", "mobile number": "phone",
                 "mobile": "phone", "home address": "address", "postal address": "address"}  # fmt: skip


def _key_name(raw: str) -> str:
    key = " ".join(raw.lower().split())
    key = key.replace("favorite", "favourite").replace("colour", "color").replace("e-mail", "email")
    key = key.replace("s' name", "s's name")
    return _KEY_SYNONYMS.get(key, key)


def is_plan_text(text: str) -> bool:
    """True for intentions ("User plans to …", "… will …"): these never supersede a fact."""
    return bool(PLAN.search(text))


def fact_key(text: str) -> FactKey | None:
    """The attribute a third-person statement sets, or None when it sets no known attribute.

    Only a fixed set of single-valued attributes is recognised (where you live, who you work
    for, "their <name/email/favourite X/…> is Y", "use X for Y"), because supersession drops
    the older line: a wrong key would silently delete a true fact.
    """
    for key, pattern in KEY_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        if key in ("residence", "employer", "tool for") and not USER_SUBJECT.search(text[: match.start()]):
            continue  # "Avó lives in Graça" is not where the user lives
        groups = match.groupdict()
        if key == "*" and not _CONCRETE.search(_clip(groups.get("v"))):
            continue  # "the weather is nice": not an attribute with a value to supersede
        if key in (None, "*"):
            name = _key_name(groups["k"])
        elif key == "choice":
            name = f"choice for {_key_name(groups['k'])}"
        elif key == "tool for":
            name = f"tool for {_clip(groups['k']).lower()}"
        else:
            name = key
        value = _clip(groups.get("v"))
        if not value or name.endswith(" "):
            continue
        if key in (None, "*") and not name.endswith("'s name"):
            # contact details are one attribute whatever they are called: "their number is
            # now +49 …" replaces "their phone number is …", "personal address: a@b" an email
            if _EMAIL_VALUE.fullmatch(value):
                name = "email"
            elif _PHONE_VALUE.fullmatch(value):
                name = "phone"
        negated = bool(
            NEGATION.search(text[max(0, match.start() - 20) : match.start()])
            or re.match(r"(?:quit|left)\b", match.group(0), re.I)
        )
        return FactKey(
            name, "" if negated else value, _clip(groups.get("old")) or (value if negated else None)
        )
    return None


def state_object(text: str) -> str | None:
    """The object of a simple state line ("User stated they use Vim" → "Vim"), for matching a
    later "(changing from Vim)"."""
    match = STATE_OBJECT.match(text)
    if match and match["d"]:
        return match["d"].strip()
    return _clip(match["v"]) if match else None


def statement_priority(
    body: str, notes: list[str], known: str | KnownView, plan: str | None = None
) -> str | None:
    """The priority a user statement deserves, or None when it is not worth a line.

    ``body`` is the user's sentence (first person), ``notes`` its resolved dates, ``known``
    everything already recorded (lowercased), ``plan`` the "will/want to …" part of a plan.

    * 🔴: a durable fact or preference (:data:`DURABLE`), a change of state, a dated plan or
      appointment (:func:`is_dated`), something a named person will do ("Ida will go to Kita
      Sonnenhof"), or an undated goal that names something ("wants to learn Portuguese");
    * 🟡: a choice among offered options ("15:02 it is"), an undated plan that names something,
      or a statement with two or more figures (a measurement);
    * 🟢: a plan of three or more content words, or narration that names something new;
    * None: everything else (small talk, apologies, reactions, narration of known things).
    """
    if CHOICE.match(body):
        return PRIORITY_MEDIUM  # "15:02 it is": picked from the options offered
    terms = key_terms(body)
    dated = is_dated(body, notes, plan is not None)
    if DURABLE.search(body) or dated or (plan is None and terms and THIRD_WILL.search(body)):
        return PRIORITY_HIGH
    if plan is not None:
        if GOAL.search(plan) and terms:
            return PRIORITY_HIGH
        return PRIORITY_MEDIUM if terms else PRIORITY_LOW if len(content_words(plan)) >= 3 else None
    numbers = [t for t in names_and_numbers(body) if t[0].isdigit() or t[0] in "$€£"]
    if len(numbers) >= 2:
        return PRIORITY_MEDIUM  # a measurement or an observation with figures
    return PRIORITY_LOW if any(t.lower() not in known for t in terms) else None


def strip_lead_in(body: str) -> str:
    """Drop a short lead-in that names nothing ("Quick intro since this is a fresh setup: …")."""
    match = LEAD_IN.match(body)
    return body[match.end() :] if match and len(match[0].split()) <= 9 and not key_terms(match[0]) else body


def is_dated(body: str, notes: list[str], plan: bool = False) -> bool:
    """A dated plan or appointment: a resolved date with a future, an appointment word or the
    user as subject; an explicit calendar date; a clock time or weekday with an appointment
    word (or, outside a plan, a future). Narration of the moment never is."""
    if CHATTER.search(body):
        return False
    booked = bool(APPOINTMENT.search(body))
    soon = booked or (not plan and bool(FUTURE_SURE.search(body)))
    if notes and (soon or plan or (FIRST_SUBJECT.search(body) and not re.search(r"\bjust\b", body, re.I))):
        return True
    if MONTH_DAY.search(body) or DAY_MONTH.search(body):
        return True
    return soon and bool(CLOCK_OR_DAY.search(body)) and not PAST.search(body)
