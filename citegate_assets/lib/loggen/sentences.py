"""The text bank: KB sentences (canonical wording and a paraphrase), user questions and what answers add.

Pure data with {slot} placeholders; slots.py fills them.
"""

from __future__ import annotations

# (topic, canonical wording, paraphrase with the same slots and facts)
SentenceTemplate = tuple[str, str, str]

# Every canonical sentence carries a number, so numeric-mismatch claims always have one to change.
# The paraphrase is the "rewording" of span_missing and the restatement of faithful claims.
SENTENCES: tuple[SentenceTemplate, ...] = (
    (
        "pricing",
        "The {plan} plan costs {money} per user per month when billed annually.",
        "Annual billing puts {plan} at {money} for each user every month.",
    ),
    (
        "pricing",
        "Overage on the {plan} plan is billed at {money} per additional block of {units} API calls.",
        "Each extra batch of {units} API calls beyond the {plan} allowance adds {money} to the invoice.",
    ),
    (
        "pricing",
        "Prices for customers in the {region} region are quoted in euros and include {pct} VAT.",
        "Accounts based in {region} see euro pricing with a VAT share of {pct} already included.",
    ),
    (
        "pricing",
        "The \u201cPriority Support\u201d add-on costs {money} per month, {qual}.",
        "Customers pay {money} monthly for Priority Support, {qual}.",
    ),
    (
        "pricing",
        "List prices increase by {pct} on {date} for all new {plan} subscriptions.",
        "New {plan} contracts signed from {date} onward carry a {pct} higher list price.",
    ),
    (
        "pricing",
        "Storage beyond {n} TB is charged at {money} per terabyte \u2014 billed in arrears.",
        "Every terabyte above the {n} TB allowance is invoiced afterwards at {money}.",
    ),
    (
        "pricing",
        "Supported billing currencies (USD, EUR, GBP\u2026) are fixed for {months} months after signature.",
        "Once signed, the invoicing currency cannot change for {months} months.",
    ),
    (
        "refunds",
        "Refunds on the {plan} plan are processed within {days} of approval.",
        "Once approved, a {plan} reimbursement takes {days} to reach the customer.",
    ),
    (
        "refunds",
        "Customers may request a full refund within {n} days of purchase, {qual}.",
        "A complete reimbursement is available for {n} days after buying, {qual}.",
    ),
    (
        "refunds",
        "Partial refunds are calculated pro rata and capped at {pct} of the annual fee.",
        "Any prorated reimbursement is limited to {pct} of what the year costs.",
    ),
    (
        "refunds",
        "Hardware returns are refunded at {money} less a {pct} restocking fee.",
        "Returned appliances earn back {money}, minus restocking charges of {pct}.",
    ),
    (
        "refunds",
        "Refund requests submitted after {date} are reviewed by the finance team within {hours} hours.",
        "Finance looks at reimbursement claims filed later than {date} inside a {hours}-hour window.",
    ),
    (
        "refunds",
        "Northwind\u2019s refund policy doesn\u2019t cover usage fees above {money} per month.",
        "Monthly consumption charges exceeding {money} are excluded from reimbursement.",
    ),
    (
        "sla",
        "The {plan} plan guarantees {uptime} monthly uptime in the {region} region.",
        "Availability for {plan} in {region} is promised at {uptime} each month.",
    ),
    (
        "sla",
        "Service credits of {pct} apply when uptime falls below {uptime} in a calendar month.",
        "If availability dips under {uptime} for a month, customers receive a {pct} credit.",
    ),
    (
        "sla",
        "Severity 1 incidents receive a first response within {n} minutes, around the clock.",
        "Critical tickets are answered in no more than {n} minutes at any hour.",
    ),
    (
        "sla",
        "Scheduled maintenance \u2014 announced {n} days ahead \u2014 is capped at {hours} hours per quarter.",
        "Planned downtime may not exceed {hours} hours a quarter and is notified {n} days in advance.",
    ),
    (
        "sla",
        "Credits are issued only if the customer files a claim within {n} days of the incident.",
        "A claim lodged more than {n} days after an outage earns no credit.",
    ),
    (
        "sla",
        "The \u2018{dc}\u2019 data center targets a recovery time of {hours} hours after a regional outage.",
        "Recovery at the {dc} facility is planned to complete in {hours} hours.",
    ),
    (
        "retention",
        "Audit logs are retained for {months} months on the {plan} plan.",
        "{plan} customers keep their audit trail for {months} months.",
    ),
    (
        "retention",
        "Deleted workspaces can be restored for {n} days, after which the data is purged.",
        "After {n} days a removed workspace is wiped and cannot come back.",
    ),
    (
        "retention",
        "Backups in the {dc} data center are kept for {n} days, {qual}.",
        "The {dc} site holds backup copies {n} days long, {qual}.",
    ),
    (
        "retention",
        "Customer data is exported on request (CSV, JSON, Parquet\u2026) within {days}.",
        "An export arrives {days} after the customer asks for it.",
    ),
    (
        "retention",
        "Log records older than {months} months are moved to cold storage at {money} per TB.",
        "Cold storage at {money} per TB takes over for logs past {months} months.",
    ),
    (
        "security",
        "All data at rest is encrypted with AES-256, and keys rotate every {n} days.",
        "Encryption keys cycle each {n} days and stored data uses AES-256.",
    ),
    (
        "security",
        "Penetration tests are performed {n} times per year by an independent firm in {dc}.",
        "An outside firm from {dc} probes the platform {n} times annually.",
    ),
    (
        "security",
        "SAML single sign-on is included on the {plan} plan for up to {seats}.",
        "The {plan} tier bundles SAML login for {seats}.",
    ),
    (
        "security",
        "Security incidents affecting customer data are reported within {hours} hours.",
        "Customers hear about data-related breaches no later than {hours} hours afterwards.",
    ),
    (
        "security",
        "Administrator sessions expire after {n} minutes of inactivity on the {plan} plan.",
        "Idle admin logins on {plan} time out once {n} minutes pass.",
    ),
    (
        "security",
        "The SOC 2 Type II report dated {date} is available under NDA to {plan} customers.",
        "Under NDA, {plan} customers can read the SOC 2 Type II attestation from {date}.",
    ),
    (
        "shipping",
        "The {product} ships within {days} to addresses in the {region} region.",
        "Delivery of a {product} to {region} customers takes {days}.",
    ),
    (
        "shipping",
        "Expedited shipping costs {money} per appliance, {qual}.",
        "Faster delivery is charged at {money} for each unit, {qual}.",
    ),
    (
        "shipping",
        "Orders of more than {units} units ship on pallets from the {dc} warehouse.",
        "Bulk orders above {units} units leave the {dc} depot palletised.",
    ),
    (
        "shipping",
        "A replacement {product} is dispatched within {hours} hours of a confirmed fault.",
        "Confirmed defects trigger a {hours}-hour turnaround for a new {product}.",
    ),
    (
        "shipping",
        "Customs duties of up to {pct} are paid by the customer for shipments to {region}.",
        "Buyers in {region} cover import duties that can reach {pct}.",
    ),
    (
        "shipping",
        "Each {product} carries a {months}-month warranty \u2014 extendable to {n} months for {money}.",
        "Warranty on the {product} starts at {months} months; {money} stretches it to {n}.",
    ),
    (
        "discounts",
        "Annual prepayment earns a {pct} discount on the {plan} plan.",
        "Paying a year upfront cuts the {plan} price by {pct}.",
    ),
    (
        "discounts",
        "Volume discounts start at {seats} and reach {pct} at the top tier.",
        "Seat-based reductions begin at {seats}, rising as high as {pct}.",
    ),
    (
        "discounts",
        "Nonprofits receive {pct} off list price, {qual}.",
        "Registered charities get a {pct} reduction, {qual}.",
    ),
    (
        "discounts",
        "Promotional code \u2018{code}\u2019 takes {money} off the first invoice until {date}.",
        "Until {date}, the {code} voucher knocks {money} from invoice one.",
    ),
    (
        "discounts",
        "Multi-year contracts of {years} years lock in pricing with a {pct} reduction.",
        "Committing for {years} years freezes rates and trims {pct}.",
    ),
    (
        "discounts",
        "Education customers pay {money} per seat for {seats}, {qual}.",
        "Schools and universities are billed {money} a seat across {seats}, {qual}.",
    ),
    (
        "partner",
        "Registered partners earn a {pct} margin on first-year {plan} subscriptions.",
        "Partners keep {pct} of year-one {plan} revenue.",
    ),
    (
        "partner",
        "Deal registration protects a partner\u2019s opportunity for {n} days in the {region} region.",
        "A registered {region} deal stays reserved to that partner over {n} days.",
    ),
    (
        "partner",
        "Gold partners must certify {n} engineers and book {money} in annual revenue.",
        "Reaching Gold requires {n} certified engineers and yearly bookings of {money}.",
    ),
    (
        "partner",
        "Commission is paid {n} days after the end customer\u2019s invoice is settled, {qual}.",
        "Payout of partner commission follows settlement by {n} days, {qual}.",
    ),
    (
        "partner",
        "Partner demo licenses cover {seats} and renew every {months} months.",
        "Demo entitlements for partners include {seats}, refreshed each {months} months.",
    ),
    (
        "partner",
        "Referral fees of {money} apply to {plan} deals closed before {date}.",
        "Closing a referred {plan} deal ahead of {date} pays {money}.",
    ),
    (
        "legal",
        'Liability is capped at fees paid in the prior {months} months (the "Cap") & excludes indirect damages.',
        "Damages are limited to {months} months of fees and indirect losses are not covered.",
    ),
    (
        "legal",
        "Either party may terminate for cause on {n} days\u2019 written notice if a breach is not cured.",
        "An uncured breach lets either side end the agreement after {n} days of notice in writing.",
    ),
    (
        "legal",
        "Service credits apply when monthly availability is < {uptime} & the claim is filed within {n} days.",
        "Credits are owed if uptime stays under {uptime} and a claim arrives inside {n} days.",
    ),
    (
        "legal",
        'The "Customer Data" definition excludes usage metrics retained for > {months} months.',
        'Usage metrics kept longer than {months} months fall outside what counts as "Customer Data".',
    ),
    (
        "legal",
        "Terms & Conditions version {n}.{digit} take effect on {date} for all {region} contracts.",
        "From {date}, every {region} agreement follows revision {n}.{digit} of the T&Cs.",
    ),
    (
        "legal",
        "Disputes under {money} are resolved by arbitration in {dc} within {n} days.",
        "Claims below {money} go to an arbitrator seated in {dc}, with {n} days allotted.",
    ),
    (
        "legal",
        'Obligations under the "Confidential Information" clause survive for {years} years after termination.',
        "Secrecy duties last {years} years beyond the end of the contract.",
    ),
    (
        "legal",
        "Fees > {money} per year require a signed order form & a purchase order number.",
        "Annual spend above {money} needs both a signed order form and a PO reference.",
    ),
)

QUESTIONS = {
    "pricing": (
        "How much does the {plan} plan cost per user?",
        "Are prices different in the {region} region?",
        "What do we pay for storage above {n} TB?",
    ),
    "refunds": (
        "How long does a refund take on the {plan} plan?",
        "Can I still get my money back after {n} days?",
        "What is the restocking fee on returned hardware?",
    ),
    "sla": (
        "What uptime does Northwind guarantee in {region}?",
        "What happens if the service is down for {hours} hours?",
        "How fast do you respond to a Severity 1 ticket?",
    ),
    "retention": (
        "How long are audit logs kept on {plan}?",
        "Can I restore a workspace I deleted {n} days ago?",
        "How do I get an export of our data?",
    ),
    "security": (
        "How often are encryption keys rotated?",
        "Is SSO included on the {plan} plan?",
        "When would you tell us about a breach?",
    ),
    "shipping": (
        "When will my {product} arrive in {region}?",
        "What does expedited shipping cost for {units} units?",
        "How long is the warranty on the {product}?",
    ),
    "discounts": (
        "Is there a discount if we pay annually for {seats}?",
        "Do nonprofits get a discount?",
        "Is the code {code} still valid?",
    ),
    "partner": (
        "What margin do partners earn on {plan} deals?",
        "How long is a deal registration valid in {region}?",
        "What does it take to become a Gold partner?",
    ),
    "legal": (
        "What is the liability cap & does it cover indirect damages?",
        'What does "Customer Data" include?',
        "Can we terminate if availability is < {uptime} for two months?",
    ),
}
QUESTION_OPENERS = (
    "We are a {plan} customer in {region}.",
    "Hi, quick question from our finance team.",
    "Our team has {seats} right now.",
    "Asking on behalf of a customer.",
)
# The user pastes a sentence from somewhere else; it is in the question, never in the context.
PASTE_WRAPPERS = (
    "My contract says \u201c{s}\u201d \u2013 is that right?",
    'Our account manager wrote: "{s}" Is that still accurate?',
    "I found this in an old email: {s} Does it still apply?",
    "The renewal quote claims \u201c{s}\u201d \u2013 can you confirm?",
)
OVERREACH_EXTRAS = (
    "and margins expanded as a result",
    "and the same terms apply in every region worldwide",
    "which Northwind doubles for enterprise accounts",
    "with no exceptions for late payments",
    "and this was confirmed by the CFO in writing",
    "and it applies retroactively to all 2024 contracts",
)
