#!/usr/bin/env python3
"""Writes the two corpora of the credential-heuristic tests (proto/tests/credentials.rs):

- ordinary_values.txt: values people keep in ordinary fields (URLs, paths, hashes, ids, prices,
  dates, names, e-mail addresses, file names, versions, sentences in several languages);
- credential_values.txt: values that carry a credential (passwords, API keys and tokens with
  and without known prefixes, JSON web tokens, key=value pairs, private key blocks, connection
  strings).

Every line is generated here from fixed word lists with a fixed seed, so the files are the same
on every run: `python3 make_corpora.py` in this folder rewrites them. One value a line; a value
that needs several lines (a private key block) is written with literal \\n escapes, which the
test turns back into line breaks.
"""

import random
import string

R = random.Random(20261130)

FIRST = ["Anna", "Lukas", "Marie", "João", "Sofía", "Mateo", "Chloé", "Giulia", "Piotr", "Agnieszka",
         "Дмитрий", "Ольга", "王伟", "李娜", "佐藤", "さくら", "Jan", "Sanne", "Emma", "Liam", "Noah",
         "Olivia", "Ahmed", "Fatima", "Kenji", "Yuki", "Lars", "Ingrid", "Mehmet", "Ayşe", "Raj",
         "Priya", "Tomás", "Inês", "Björn", "Zoë", "François", "Łukasz", "Małgorzata", "Søren"]
LAST = ["Müller", "Schmidt", "Dubois", "Martin", "García", "Fernández", "Rossi", "Bianchi", "Silva",
        "Santos", "de Vries", "Jansen", "Kowalski", "Nowak", "Иванов", "Петрова", "Smith", "Johnson",
        "O'Brien", "Nakamura", "Tanaka", "Chen", "Wang", "Kim", "Nguyen", "Öztürk", "Andersson",
        "Van der Berg", "Lefèvre", "Żuraw", "Mac Giolla", "Kumar", "Sharma", "Costa", "Ferreira"]
COMPANIES = ["Acme Corp", "Globex GmbH", "Initech LLC", "Umbrella S.A.", "Stark Industries",
             "Wayne Enterprises", "Hooli Inc.", "Vandelay Industries", "Soylent B.V.",
             "Kowalski i Syn Sp. z o.o.", "Société Générale de Test", "Müller & Söhne KG",
             "株式会社サンプル", "示例有限公司", "ООО Ромашка", "Tyrell Corporation", "Cyberdyne Systems"]
PRODUCTS = ["MacBook Pro 16-inch (2023)", "iPhone15ProMax256GB", "Galaxy S24 Ultra",
            "ThinkPad X1 Carbon Gen 11", "PlayStation5DigitalEdition", "Kindle Paperwhite (11th Gen)",
            "AirPods Pro 2nd generation", "Dell XPS 13 9315", "Sony WH-1000XM5", "Pixel8Pro128GB",
            "LG OLED55C3PUA", "Bosch Serie 6 WAU28T40", "IKEA BILLY Bookcase 80x28x202",
            "Logitech MX Master 3S", "Raspberry Pi 5 8GB", "Nintendo Switch OLED Model"]
DOMAINS = ["example.com", "wikipedia.org", "github.com", "news.ycombinator.com", "www.bbc.co.uk",
           "docs.python.org", "maps.google.com", "www.amazon.de", "shop.example.fr", "mail.example.es",
           "intranet.corp.local", "localhost", "192.168.1.20", "[2001:db8::1]", "www.gov.pl",
           "yandex.ru", "www.baidu.com", "www.yahoo.co.jp", "bol.com", "www.mercadolivre.com.br"]
WORDS = ["report", "invoice", "meeting", "notes", "project", "budget", "summer", "holiday",
         "photos", "draft", "final", "review", "design", "docs", "api", "users", "settings",
         "products", "search", "category", "blog", "2024", "archive", "team", "roadmap", "index",
         "assets", "images", "download", "release", "changelog", "help", "support", "contact"]
EXT = ["pdf", "docx", "xlsx", "pptx", "txt", "md", "png", "jpg", "csv", "json", "zip", "tar.gz",
       "odt", "html", "py", "rs", "mp4", "svg"]
QUERY_KEYS = ["id", "page", "q", "lang", "utm_source", "utm_campaign", "ref", "sort", "filter",
              "v", "t", "size", "color", "category", "offset", "limit", "tab", "view"]
SENTENCES = [
    "Meeting moved to Thursday at 3 pm, room B12.",
    "Please send me the slides before the review.",
    "Can you pick up milk on the way home?",
    "The build passed on the second try after the cache was cleared.",
    "Remember to water the plants while I'm away.",
    "Forgot your password? Use the reset link on the sign-in page.",
    "I changed my password last week, so the old one no longer works.",
    "The token of appreciation was lovely, thank you all!",
    "Our secret ingredient is a pinch of nutmeg.",
    "Bitte bis Freitag die Rechnung prüfen.",
    "Wir treffen uns um 10 Uhr am Hauptbahnhof.",
    "Le rendez-vous est confirmé pour lundi prochain.",
    "N'oubliez pas d'apporter vos papiers d'identité.",
    "La reunión empieza a las nueve y media.",
    "¿Puedes revisar el presupuesto antes del viernes?",
    "Il treno per Milano parte alle 18:45.",
    "Grazie mille per l'aiuto di ieri!",
    "A entrega está prevista para amanhã de manhã.",
    "Obrigado pela paciência durante a migração.",
    "De vergadering is verplaatst naar woensdag.",
    "Kun je de notulen nog even nakijken?",
    "Spotkanie przeniesiono na czwartek o 14:00.",
    "Proszę o potwierdzenie odbioru przesyłki.",
    "Встреча перенесена на завтра в 11 часов.",
    "Спасибо за быстрый ответ!",
    "会议改到明天下午三点。",
    "请在周五之前提交报告。",
    "明日の会議は10時からです。",
    "資料を共有していただけますか?",
    "The quarterly numbers look better than expected.",
    "Lunch order: two salads, one soup, and a sandwich.",
    "Ship to: 221B Baker Street, London NW1 6XE",
    "Rue de Rivoli 99, 75001 Paris, France",
    "Calle Mayor 5, 3º izquierda, 28013 Madrid",
    "Unter den Linden 77, 10117 Berlin",
    "ul. Marszałkowska 10/12, 00-590 Warszawa",
    "Herengracht 182, 1016 BR Amsterdam",
    "Rua Augusta 100, 1100-053 Lisboa",
    "Via del Corso 12, 00186 Roma RM",
    "The PIN pad at the front desk is broken again.",
    "Use the one-time code from the app when the bank asks.",
    "Card number field should accept spaces between groups.",
    "Deploy window: Saturday 02:00-04:00 UTC.",
    "Ticket closed as duplicate of the login issue.",
    "Happy birthday! Hope you have a wonderful day.",
    "Out of office until 12 August, limited access to e-mail.",
    "Re: Q3 planning - updated agenda attached",
    "Fwd: Your order has shipped",
    "how to bake sourdough bread at home",
    "best hiking trails near Innsbruck",
    "flights from Warsaw to Lisbon in May",
    "python list comprehension with condition",
    "weather tomorrow Berlin",
    "Key takeaways: ship smaller, test earlier, write it down.",
    "Step 1: open the lid. Step 2: remove the filter.",
    "Note: the API rate limit is 100 requests per minute.",
    "Status: waiting for the customer's reply.",
    "Size: M, Color: navy blue, Qty: 2",
]
TLDS = ["com", "org", "net", "de", "fr", "es", "it", "pl", "nl", "ru", "jp", "cn", "io"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
MONATE = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
          "Oktober", "November", "Dezember"]
MOIS = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
        "octobre", "novembre", "décembre"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def pick(xs):
    return R.choice(xs)


def hexs(n, upper=False):
    s = "".join(R.choice("0123456789abcdef") for _ in range(n))
    return s.upper() if upper else s


def digits(n):
    return "".join(R.choice(string.digits) for _ in range(n))


def uppers(n):
    return "".join(R.choice(string.ascii_uppercase) for _ in range(n))


def alnum(n, alphabet=string.ascii_letters + string.digits):
    return "".join(R.choice(alphabet) for _ in range(n))


def slug():
    return "-".join(pick(WORDS) for _ in range(R.randint(1, 4)))


def url():
    scheme = pick(["https", "https", "https", "http", "ftp"])
    host = pick(DOMAINS)
    port = pick(["", "", "", ":8080", ":443", ":3000"])
    path = "/".join(slug() for _ in range(R.randint(0, 3)))
    kind = R.randint(0, 9)
    if kind == 0:
        path += f"/{pick(WORDS)}.{pick(EXT)}"
    elif kind == 1:
        path = f"watch?v={alnum(11, string.ascii_letters + string.digits + '-_')}"
        host = "www.youtube.com"
        return f"https://{host}/{path}"
    elif kind == 2:
        path = f"document/d/{alnum(44, string.ascii_letters + string.digits + '-_')}/edit"
        host = "docs.google.com"
    elif kind == 3:
        path = f"{pick(WORDS)}/issues/{R.randint(1, 99999)}"
        host = "github.com"
    q = ""
    if R.random() < 0.5:
        q = "?" + "&".join(f"{pick(QUERY_KEYS)}={pick([str(R.randint(1, 999)), pick(WORDS), 'en', 'de-DE', 'newsletter'])}"
                           for _ in range(R.randint(1, 3)))
    frag = pick(["", "", "", "#top", "#section-2", f"#{pick(WORDS)}"])
    plain = host[0].isalpha() and not host.startswith("www.") and host != "localhost"
    prefix = pick(["", "", "", "", "www."]) if scheme == "https" and kind > 3 and plain else ""
    if R.random() < 0.08:
        return f"{pick(DOMAINS)}/{slug()}"
    return f"{scheme}://{prefix}{host}{port}/{path}{q}{frag}"


def path():
    kind = R.randint(0, 5)
    parts = [pick(WORDS) for _ in range(R.randint(1, 4))]
    name = f"{pick(WORDS)}_{pick(WORDS)}{pick(['', '_v2', '-final', '_2024-03-01', ' (1)'])}.{pick(EXT)}"
    if kind == 0:
        return "/home/" + pick(["anna", "lukas", "jdoe", "marie"]) + "/" + "/".join(parts) + "/" + name
    if kind == 1:
        return "C:\\Users\\" + pick(["Anna", "Lukas", "JDoe"]) + "\\" + "\\".join(p.capitalize() for p in parts) + "\\" + name
    if kind == 2:
        return "~/" + "/".join(parts) + "/" + name
    if kind == 3:
        return "./" + "/".join(parts) + "/" + name
    if kind == 4:
        return pick(["/usr/share/", "/etc/", "/var/log/", "/opt/", "/srv/data/"]) + "/".join(parts)
    return "src/" + "/".join(parts) + "/" + pick(["main.rs", "index.ts", "App.java", "views.py", "README.md"])


def hash_value():
    kind = R.randint(0, 6)
    if kind == 0:
        return hexs(32)
    if kind == 1:
        return hexs(40)
    if kind == 2:
        return hexs(64)
    if kind == 3:
        return hexs(7)
    if kind == 4:
        return "sha256:" + hexs(64)
    if kind == 5:
        return hexs(64, upper=True)
    return hexs(128)


def ident():
    kind = R.randint(0, 17)
    if kind == 0:
        return f"{hexs(8)}-{hexs(4)}-4{hexs(3)}-{pick('89ab')}{hexs(3)}-{hexs(12)}"
    if kind == 1:
        return f"{hexs(8)}-{hexs(4)}-4{hexs(3)}-{pick('89AB')}{hexs(3)}-{hexs(12)}".upper()
    if kind == 2:
        return f"INV-{R.randint(2019, 2026)}-{digits(6)}"
    if kind == 3:
        return f"{uppers(R.randint(2, 5))}-{R.randint(1, 99999)}"
    if kind == 4:
        return f"SKU-{uppers(2)}{digits(2)}-{uppers(2)}{digits(2)}-{uppers(2)}{digits(2)}"
    if kind == 5:
        return f"1Z{alnum(6, string.ascii_uppercase + string.digits)}{digits(10)}"
    if kind == 6:
        return f"978-{R.randint(0, 9)}-{digits(3)}-{digits(5)}-{R.randint(0, 9)}"
    if kind == 7:
        return pick(["DE", "FR", "NL", "PL", "ES", "IT"]) + digits(2) + " " + " ".join(digits(4) for _ in range(4)) + " " + digits(2)
    if kind == 8:
        return pick(["+49 30 ", "+33 1 ", "+48 22 ", "+1 (555) ", "+81 3-", "+7 495 "]) + digits(3) + " " + digits(4)
    if kind == 9:
        return ".".join(str(R.randint(1, 254)) for _ in range(4))
    if kind == 10:
        return ":".join(hexs(2) for _ in range(6)).upper()
    if kind == 11:
        return f"{pick(['jdoe', 'anna.m', 'lukas_s', 'marie-claire', 'piotr.k'])}{R.randint(1, 9999)}"
    if kind == 12:
        return hexs(24)
    if kind == 13:
        return f"{pick(['ORD', 'PO', 'REQ', 'CASE'])}{digits(8)}"
    if kind == 14:
        return f"{digits(3)}-{digits(7)}-{digits(7)}"
    if kind == 15:
        return f"SN-{hexs(4, True)}-{hexs(4, True)}-{hexs(4, True)}"
    if kind == 16:
        return alnum(17, "ABCDEFGHJKLMNPRSTUVWXYZ0123456789")
    return f"{pick(['cus', 'prod', 'inv', 'ch'])}_{alnum(14)}"


def price():
    v = R.randint(0, 250000) / 100
    fmt = R.randint(0, 8)
    if fmt == 0:
        return f"${v:,.2f}"
    if fmt == 1:
        return f"€{v:,.2f}".replace(",", " ").replace(".", ",")
    if fmt == 2:
        return f"{v:.2f} {pick(['USD', 'EUR', 'PLN', 'GBP', 'CHF', 'JPY'])}"
    if fmt == 3:
        return f"¥{int(v * 100):,}"
    if fmt == 4:
        return f"£{v:.2f}/month"
    if fmt == 5:
        return f"-${v:.2f}"
    if fmt == 6:
        return f"{v:,.2f} zł".replace(",", " ").replace(".", ",")
    if fmt == 7:
        return f"{int(v)} ₽"
    return f"CHF {v:.2f}"


def date():
    y, m, d = R.randint(1990, 2030), R.randint(1, 12), R.randint(1, 28)
    hh, mm, ss = R.randint(0, 23), R.randint(0, 59), R.randint(0, 59)
    fmt = R.randint(0, 11)
    if fmt == 0:
        return f"{y}-{m:02}-{d:02}"
    if fmt == 1:
        return f"{y}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"
    if fmt == 2:
        return f"{m:02}/{d:02}/{y} {hh:02}:{mm:02}"
    if fmt == 3:
        return f"{d:02}.{m:02}.{y}"
    if fmt == 4:
        return f"{pick(DAYS)}, {d} {MONTHS[m - 1]} {y}"
    if fmt == 5:
        return f"{d}. {MONATE[m - 1]} {y}"
    if fmt == 6:
        return f"{d} {MOIS[m - 1]} {y}"
    if fmt == 7:
        return f"{y}年{m}月{d}日"
    if fmt == 8:
        return f"{hh:02}:{mm:02}"
    if fmt == 9:
        return f"{y}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{digits(3)}+02:00"
    if fmt == 10:
        return f"{pick(DAYS)[:3]}, {d:02} {MONTHS[m - 1][:3]} {y} {hh:02}:{mm:02}:{ss:02} GMT"
    return f"Q{R.randint(1, 4)} {y}"


def name():
    kind = R.randint(0, 5)
    if kind <= 2:
        return f"{pick(FIRST)} {pick(LAST)}"
    if kind == 3:
        return pick(COMPANIES)
    if kind == 4:
        return pick(PRODUCTS)
    return f"{pick(LAST)}, {pick(FIRST)}"


def email():
    local = pick(["anna", "lukas.mueller", "m.dubois", "jdoe", "sofia_garcia", "piotr.kowalski",
                  "info", "support", "no-reply", "sales+eu"])
    return f"{local}{pick(['', '', str(R.randint(1, 99))])}@{pick(['example', 'mail', 'corp', 'firma', 'societe'])}.{pick(TLDS)}"


def misc():
    kind = R.randint(0, 12)
    if kind == 12:
        # Names that mix cases and digits: the hard cases for a randomness test.
        return pick(["OAuth2ClientConfigV3", "H264VideoDecoderImpl", "WH1000XM5BlackEdition",
                     "#Sommerfest2024Berlin", "ipv6AddrV4MappedTest", "Win11ProUpgradeKit",
                     "MyFavouritePlaylist2023", "GoPro HERO12 Black", "S3BucketPolicyEditor",
                     "TeamMeetingNotes2024Q3", "Base64DecoderTests", "Wi-Fi_Home5GHz_Extender",
                     "Invoice_2024-03_AcmeCorp.pdf", "ProjectPhoenixPhase2Kickoff",
                     "UTF8StringBuilder16", "SeasonFinaleS03E10.mkv", "DSC01234_Edited2.JPG"])
    if kind == 0:
        return f"{pick(WORDS).capitalize()}_{pick(WORDS).capitalize()}_{pick(['Final', 'v2', 'Draft', 'FINAL_v3'])}.{pick(EXT)}"
    if kind == 1:
        return f"v{R.randint(0, 20)}.{R.randint(0, 40)}.{R.randint(0, 99)}{pick(['', '-beta.1', '-rc.2+build.45', '-alpha'])}"
    if kind == 2:
        return "#" + hexs(6, True)
    if kind == 3:
        return f"{R.uniform(-90, 90):.6f}, {R.uniform(-180, 180):.6f}"
    if kind == 4:
        return "#" + pick(["TBT", "MondayMotivation", "rustlang", "opensource", "Sommerfest2024"])
    if kind == 5:
        return pick(["font-size: 12px", "margin: 0 auto", "color: #333", "display: flex"])
    if kind == 6:
        return pick(["Ctrl+Shift+T", "Alt+F4", "Cmd+Option+Esc", "Super+L"])
    if kind == 7:
        return f"{R.uniform(0, 100):.1f} {pick(['kg', 'km', 'mph', '°C', '%', 'MB', 'GB/s'])}"
    if kind == 8:
        return pick(["getUserById", "handleSubmitButtonClick", "MAX_RETRY_COUNT", "parseHttpResponse2",
                     "XMLHttpRequestUpload", "OnboardingStepThreeView", "useEffectCleanupHook"])
    if kind == 9:
        return f"{pick(WORDS)}-{pick(WORDS)}-{R.randint(1, 999)}.{pick(['example.com', 'internal', 'local'])}"
    if kind == 10:
        return f"arn:aws:s3:::{pick(WORDS)}-{pick(WORDS)}-bucket/{pick(WORDS)}/{pick(WORDS)}.{pick(EXT)}"
    return f"{R.randint(1, 20)}x {pick(PRODUCTS)}"


def ordinary():
    plan = [(url, 420), (path, 300), (hash_value, 200), (ident, 420), (price, 300), (date, 300),
            (name, 380), (email, 150), (misc, 220)]
    out = []
    for f, n in plan:
        out.extend(f() for _ in range(n))
    out.extend(SENTENCES)
    for _ in range(400):
        a, b = pick(SENTENCES), pick(SENTENCES)
        out.append(a if R.random() < 0.5 else f"{a} {b}")
    return out


def password(n):
    pool = string.ascii_letters + string.digits + "!@#$%^&*()-_=+[]{};:,.?/"
    while True:
        s = "".join(R.choice(pool) for _ in range(n))
        if any(c.islower() for c in s) and any(c.isupper() for c in s) and any(c.isdigit() for c in s):
            return s


def b64(nbytes):
    import base64
    return base64.b64encode(bytes(R.randrange(256) for _ in range(nbytes))).decode()


def b64url(nbytes):
    return b64(nbytes).replace("+", "-").replace("/", "_").rstrip("=")


def jwt():
    import base64
    import json
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()).decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": digits(8), "iat": R.randint(10**9, 2 * 10**9)}).encode()).decode().rstrip("=")
    return f"{head}.{body}.{b64url(32)}"


def credential():
    kind = R.randint(0, 15)
    if kind == 0:
        return password(R.randint(16, 28))
    if kind == 1:
        return "ghp_" + alnum(36)
    if kind == 2:
        return "glpat-" + alnum(20, string.ascii_letters + string.digits + "-_")
    if kind == 3:
        return f"xoxb-{digits(12)}-{digits(13)}-{alnum(24)}"
    if kind == 4:
        return "sk-proj-" + alnum(48, string.ascii_letters + string.digits + "-_")
    if kind == 5:
        return pick(["sk_live_", "sk_test_", "rk_live_"]) + alnum(24)
    if kind == 6:
        return "AIza" + alnum(35, string.ascii_letters + string.digits + "-_")
    if kind == 7:
        return "AKIA" + alnum(16, string.ascii_uppercase + "234567")
    if kind == 8:
        return jwt()
    if kind == 9:
        return f"{pick(['password', 'passwd', 'api_key', 'secret', 'token', 'client_secret', 'PASSWORD'])}{pick(['=', ': ', ' = ', '='])}{password(R.randint(8, 20))}"
    if kind == 10:
        return "-----BEGIN " + pick(["RSA ", "OPENSSH ", "EC ", ""]) + "PRIVATE KEY-----\\n" + b64(48) + "\\n" + b64(48) + "\\n-----END PRIVATE KEY-----"
    if kind == 11:
        return f"{pick(['postgres', 'mysql', 'mongodb', 'redis', 'amqp'])}://{pick(['admin', 'app', 'svc_user'])}:{password(R.randint(12, 20)).replace('@', 'a').replace('/', 's').replace('?', 'q').replace('#', 'h')}@{pick(['db.internal', '10.0.0.5', 'cache.local'])}:{R.randint(1000, 9999)}/{pick(WORDS)}"
    if kind == 12:
        return b64(R.choice([24, 32, 48]))
    if kind == 13:
        return alnum(R.randint(24, 48))
    if kind == 14:
        return f"export {pick(['GITHUB_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'OPENAI_API_KEY', 'DB_PASSWORD'])}={alnum(40)}"
    return f"Authorization: Bearer {alnum(40, string.ascii_letters + string.digits + '-._~')}"


def main():
    ordinary_values = ordinary()
    creds = [credential() for _ in range(600)]
    for fname, lines, what in [("ordinary_values.txt", ordinary_values, "ordinary"),
                               ("credential_values.txt", creds, "credential")]:
        with open(fname, "w", encoding="utf-8") as f:
            for line in lines:
                assert "\n" not in line, line
                f.write(line + "\n")
        print(f"{fname}: {len(lines)} {what} values")


if __name__ == "__main__":
    main()
