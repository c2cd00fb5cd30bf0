"""Static entity tables the seeded world draws from: cities, people, airlines, products, units.

Pools are deliberately large so task synthesis can hold entities out for the test split.
"""

from __future__ import annotations

# name, country, IATA code, latitude, longitude, mean June temperature (°C), wetness 0..1
CITIES: tuple[tuple[str, str, str, float, float, float, float], ...] = (
    ("Lima", "Peru", "LIM", -12.05, -77.04, 17.0, 0.1),
    ("Bogota", "Colombia", "BOG", 4.71, -74.07, 14.0, 0.6),
    ("Quito", "Ecuador", "UIO", -0.18, -78.47, 14.0, 0.4),
    ("Santiago", "Chile", "SCL", -33.45, -70.67, 9.0, 0.3),
    ("Buenos Aires", "Argentina", "EZE", -34.60, -58.38, 11.0, 0.3),
    ("Sao Paulo", "Brazil", "GRU", -23.55, -46.63, 17.0, 0.3),
    ("Rio de Janeiro", "Brazil", "GIG", -22.91, -43.17, 22.0, 0.3),
    ("Mexico City", "Mexico", "MEX", 19.43, -99.13, 18.0, 0.7),
    ("Havana", "Cuba", "HAV", 23.11, -82.37, 28.0, 0.6),
    ("Panama City", "Panama", "PTY", 8.98, -79.52, 28.0, 0.8),
    ("New York", "United States", "JFK", 40.71, -74.01, 22.0, 0.4),
    ("Chicago", "United States", "ORD", 41.88, -87.63, 21.0, 0.4),
    ("Los Angeles", "United States", "LAX", 34.05, -118.24, 21.0, 0.05),
    ("Miami", "United States", "MIA", 25.76, -80.19, 28.0, 0.7),
    ("Seattle", "United States", "SEA", 47.61, -122.33, 16.0, 0.3),
    ("Denver", "United States", "DEN", 39.74, -104.99, 20.0, 0.3),
    ("Toronto", "Canada", "YYZ", 43.65, -79.38, 19.0, 0.4),
    ("Vancouver", "Canada", "YVR", 49.28, -123.12, 16.0, 0.4),
    ("Montreal", "Canada", "YUL", 45.50, -73.57, 19.0, 0.4),
    ("London", "United Kingdom", "LHR", 51.51, -0.13, 16.0, 0.4),
    ("Dublin", "Ireland", "DUB", 53.35, -6.26, 14.0, 0.5),
    ("Paris", "France", "CDG", 48.86, 2.35, 18.0, 0.4),
    ("Madrid", "Spain", "MAD", 40.42, -3.70, 23.0, 0.1),
    ("Lisbon", "Portugal", "LIS", 38.72, -9.14, 21.0, 0.1),
    ("Rome", "Italy", "FCO", 41.90, 12.50, 23.0, 0.15),
    ("Berlin", "Germany", "BER", 52.52, 13.40, 18.0, 0.4),
    ("Amsterdam", "Netherlands", "AMS", 52.37, 4.90, 16.0, 0.45),
    ("Vienna", "Austria", "VIE", 48.21, 16.37, 19.0, 0.45),
    ("Stockholm", "Sweden", "ARN", 59.33, 18.07, 15.0, 0.4),
    ("Oslo", "Norway", "OSL", 59.91, 10.75, 15.0, 0.45),
    ("Helsinki", "Finland", "HEL", 60.17, 24.94, 14.0, 0.4),
    ("Warsaw", "Poland", "WAW", 52.23, 21.01, 17.0, 0.45),
    ("Athens", "Greece", "ATH", 37.98, 23.73, 25.0, 0.05),
    ("Istanbul", "Turkey", "IST", 41.01, 28.98, 22.0, 0.2),
    ("Cairo", "Egypt", "CAI", 30.04, 31.24, 28.0, 0.0),
    ("Nairobi", "Kenya", "NBO", -1.29, 36.82, 17.0, 0.2),
    ("Lagos", "Nigeria", "LOS", 6.52, 3.38, 26.0, 0.85),
    ("Cape Town", "South Africa", "CPT", -33.92, 18.42, 12.0, 0.6),
    ("Casablanca", "Morocco", "CMN", 33.57, -7.59, 21.0, 0.05),
    ("Dubai", "United Arab Emirates", "DXB", 25.20, 55.27, 34.0, 0.0),
    ("Mumbai", "India", "BOM", 19.08, 72.88, 29.0, 0.9),
    ("Delhi", "India", "DEL", 28.70, 77.10, 33.0, 0.4),
    ("Bangkok", "Thailand", "BKK", 13.76, 100.50, 29.0, 0.75),
    ("Singapore", "Singapore", "SIN", 1.35, 103.82, 28.0, 0.7),
    ("Hong Kong", "China", "HKG", 22.32, 114.17, 28.0, 0.8),
    ("Shanghai", "China", "PVG", 31.23, 121.47, 25.0, 0.7),
    ("Beijing", "China", "PEK", 39.90, 116.41, 25.0, 0.3),
    ("Seoul", "South Korea", "ICN", 37.57, 126.98, 22.0, 0.5),
    ("Tokyo", "Japan", "HND", 35.68, 139.69, 22.0, 0.7),
    ("Osaka", "Japan", "KIX", 34.69, 135.50, 23.0, 0.7),
    ("Sydney", "Australia", "SYD", -33.87, 151.21, 13.0, 0.4),
    ("Melbourne", "Australia", "MEL", -37.81, 144.96, 10.0, 0.4),
    ("Auckland", "New Zealand", "AKL", -36.85, 174.76, 12.0, 0.6),
    ("Reykjavik", "Iceland", "KEF", 64.15, -21.94, 10.0, 0.5),
)

AIRLINES: tuple[tuple[str, str], ...] = (
    ("SK", "Skyline Air"), ("AZ", "Azure Airways"), ("NR", "Northern Routes"),
    ("PA", "Pacific Arc"), ("TL", "Terra Link"), ("VX", "Vertex Jet"), ("HB", "Horizon Blue"),
    ("CW", "Coastwind"),
)

FIRST_NAMES: tuple[str, ...] = (
    "Ana", "Bruno", "Carla", "Diego", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kira", "Luis", "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Samir", "Tara",
    "Umar", "Vera", "Wei", "Ximena", "Yusuf", "Zoe", "Amara", "Boris", "Chloe", "Dmitri",
    "Esther", "Felix", "Gita", "Hector", "Ingrid", "Jamal", "Leila", "Marco", "Nadia", "Oscar",
)

LAST_NAMES: tuple[str, ...] = (
    "Alvarez", "Becker", "Chen", "Dubois", "Eriksen", "Fontaine", "Garcia", "Haddad", "Ito",
    "Jensen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quispe", "Rossi",
    "Santos", "Tanaka", "Ueda", "Varga", "Wagner", "Xu", "Yilmaz", "Zimmer", "Mendes", "Park",
    "Nielsen", "Costa",
)

# product name, category, base price
PRODUCTS: tuple[tuple[str, str, float], ...] = (
    ("Wireless Earbuds", "electronics", 59.99), ("Noise-Cancelling Headphones", "electronics", 199.0),
    ("Smartwatch", "electronics", 249.0), ("USB-C Charger", "electronics", 24.99),
    ("Bluetooth Speaker", "electronics", 79.5), ("E-Reader", "electronics", 129.0),
    ("Portable SSD", "electronics", 109.0), ("Mechanical Keyboard", "electronics", 89.0),
    ("Webcam", "electronics", 64.0), ("Power Bank", "electronics", 39.99),
    ("Running Shoes", "apparel", 119.0), ("Rain Jacket", "apparel", 89.99),
    ("Wool Sweater", "apparel", 74.0), ("Denim Jeans", "apparel", 59.0),
    ("Cotton T-Shirt", "apparel", 19.99), ("Hiking Boots", "apparel", 149.0),
    ("Baseball Cap", "apparel", 22.0), ("Winter Gloves", "apparel", 29.5),
    ("Chef Knife", "home", 69.0), ("Cast Iron Skillet", "home", 44.99),
    ("French Press", "home", 34.0), ("Desk Lamp", "home", 39.0),
    ("Throw Blanket", "home", 49.0), ("Ceramic Mug Set", "home", 27.5),
    ("Air Purifier", "home", 159.0), ("Robot Vacuum", "home", 299.0),
    ("Yoga Mat", "sports", 32.0), ("Adjustable Dumbbells", "sports", 219.0),
    ("Camping Tent", "sports", 179.0), ("Water Bottle", "sports", 18.0),
    ("Cycling Helmet", "sports", 65.0), ("Tennis Racket", "sports", 139.0),
    ("Mystery Novel", "books", 14.99), ("Cookbook", "books", 29.99),
    ("Atlas of the World", "books", 45.0), ("Poetry Collection", "books", 16.5),
    ("Science Encyclopedia", "books", 79.0), ("Travel Guide", "books", 21.0),
    ("Board Game", "toys", 39.0), ("Puzzle 1000 Pieces", "toys", 19.0),
    ("Building Blocks Set", "toys", 59.0), ("Remote Control Car", "toys", 49.99),
    ("Plush Bear", "toys", 24.0), ("Face Moisturizer", "beauty", 28.0),
    ("Sunscreen SPF 50", "beauty", 16.0), ("Shampoo", "beauty", 12.5),
    ("Electric Toothbrush", "beauty", 69.0), ("Perfume", "beauty", 95.0),
)

PRODUCT_CATEGORIES: tuple[str, ...] = ("electronics", "apparel", "home", "sports", "books",
                                       "toys", "beauty")

EVENT_TITLES: tuple[str, ...] = (
    "Team standup", "Project review", "Dentist appointment", "Lunch with Maya",
    "Budget planning", "Yoga class", "Client call", "Design workshop", "1:1 with manager",
    "Quarterly report", "Parent-teacher meeting", "Book club", "Car service", "Interview panel",
    "Sprint retrospective", "Doctor checkup", "Piano lesson", "Product demo", "Hiring sync",
    "Family dinner", "Gym session", "Marketing sync", "Code review", "Vendor meeting",
)

LOCATIONS: tuple[str, ...] = ("Room A", "Room B", "Main office", "Online", "Cafe Central",
                              "Downtown clinic", "Community hall", "Home")

PAYEES: tuple[str, ...] = ("electricity", "water", "internet", "phone", "rent", "insurance",
                           "credit_card")

TXN_CATEGORIES: tuple[str, ...] = ("groceries", "dining", "transport", "utilities", "shopping",
                                   "salary", "transfer", "travel", "health", "entertainment")

MERCHANTS: dict[str, tuple[str, ...]] = {
    "groceries": ("FreshMart", "Green Grocer", "Daily Foods"),
    "dining": ("Bistro 21", "Noodle House", "Cafe Aroma"),
    "transport": ("Metro Transit", "CityCab", "FuelStop"),
    "utilities": ("PowerGrid Co", "AquaWorks", "NetFiber"),
    "shopping": ("MegaStore", "Urban Outfit", "TechHub"),
    "salary": ("Employer Payroll",),
    "transfer": ("Internal Transfer",),
    "travel": ("Skyline Air", "Harbor Hotel", "RailPass"),
    "health": ("CityPharmacy", "Wellness Clinic"),
    "entertainment": ("CineMax", "StreamBox", "Concert Hall"),
}

# base exchange rates: units of currency per 1 USD
CURRENCY_RATES: dict[str, float] = {
    "USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 156.0, "CAD": 1.37, "AUD": 1.51, "CHF": 0.90,
    "CNY": 7.24, "INR": 83.4, "MXN": 17.1, "BRL": 5.1, "PEN": 3.74, "COP": 3950.0, "SEK": 10.6,
}

# unit -> (dimension, factor to the dimension's base unit); temperature is handled apart
UNITS: dict[str, tuple[str, float]] = {
    "millimeter": ("length", 0.001), "centimeter": ("length", 0.01), "meter": ("length", 1.0),
    "kilometer": ("length", 1000.0), "inch": ("length", 0.0254), "foot": ("length", 0.3048),
    "yard": ("length", 0.9144), "mile": ("length", 1609.344),
    "milligram": ("mass", 1e-6), "gram": ("mass", 0.001), "kilogram": ("mass", 1.0),
    "ounce": ("mass", 0.028349523125), "pound": ("mass", 0.45359237), "stone": ("mass", 6.35029318),
    "milliliter": ("volume", 0.001), "liter": ("volume", 1.0), "cubic_meter": ("volume", 1000.0),
    "teaspoon": ("volume", 0.00492892), "tablespoon": ("volume", 0.0147868),
    "cup": ("volume", 0.236588), "fluid_ounce": ("volume", 0.0295735), "gallon": ("volume", 3.78541),
    "second": ("time", 1.0), "minute": ("time", 60.0), "hour": ("time", 3600.0),
    "day": ("time", 86400.0), "week": ("time", 604800.0),
    "meter_per_second": ("speed", 1.0), "kilometer_per_hour": ("speed", 1 / 3.6),
    "mile_per_hour": ("speed", 0.44704), "knot": ("speed", 0.514444),
    "square_meter": ("area", 1.0), "square_foot": ("area", 0.09290304),
    "hectare": ("area", 10000.0), "acre": ("area", 4046.8564224),
    "celsius": ("temperature", 1.0), "fahrenheit": ("temperature", 1.0), "kelvin": ("temperature", 1.0),
}
