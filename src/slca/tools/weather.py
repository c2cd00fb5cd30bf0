"""Weather domain: current conditions, forecasts, history, air quality, comparisons, alerts."""

from __future__ import annotations

from slca.tools.registry import (
    ToolError,
    array,
    boolean,
    date,
    enum,
    integer,
    not_found,
    number,
    obj,
    params,
    string,
    tool,
)
from slca.tools.world import (
    CITY_BY_NAME,
    CONDITIONS,
    HISTORY_DAYS,
    HORIZON_DAYS,
    World,
    day_offset,
    shift_day,
)

D = "weather"
UNITS = ("celsius", "fahrenheit")
METRICS = ("temperature", "precipitation_chance", "humidity", "wind_kph")
AQI_BANDS = (
    (50, "good"),
    (100, "moderate"),
    (150, "unhealthy_for_sensitive_groups"),
    (200, "unhealthy"),
    (10**9, "very_unhealthy"),
)

CITY = string("City name, e.g. 'Lima' or 'New York'.", minLength=2)
UNITS_P = enum(UNITS, "Temperature units; defaults to celsius.")
TEMP = number("Temperature in the requested units.")
COND = enum(CONDITIONS, "Sky condition.")


def city_row(name: str) -> tuple:
    row = CITY_BY_NAME.get(name.strip().lower())
    if row is None:
        raise ToolError(
            "not_found",
            (f"No city found with name {name}. Use a major city name such as Lima, Paris or Tokyo."),
        )
    return row


def to_units(celsius: float, units: str) -> float:
    return round(celsius * 9 / 5 + 32, 1) if units == "fahrenheit" else round(celsius, 1)


def check_window(day: str, back: int, ahead: int) -> None:
    off = day_offset(day)
    if not -back <= off <= ahead:
        raise ToolError(
            "not_found",
            (f"No weather data for {day}; available dates run from {back} days before to {ahead} days after today."),
        )


@tool(
    D,
    "get_current_weather",
    "Get today's weather conditions for a city.",
    params({"city": CITY, "units": UNITS_P}, ["city"]),
    obj(
        {
            "city": string(),
            "country": string(),
            "date": date(),
            "temperature": TEMP,
            "feels_like": TEMP,
            "units": enum(UNITS),
            "condition": COND,
            "humidity": integer(minimum=0, maximum=100),
            "wind_kph": number(minimum=0),
        }
    ),
)
def get_current_weather(world: World, args: dict) -> dict:
    row, units = city_row(args["city"]), args.get("units", "celsius")
    w = world.weather_on(row, world.today)
    now = (w["high_c"] * 2 + w["low_c"]) / 3
    feels = now - w["wind_kph"] / 10 + (w["humidity"] - 50) / 25
    return {
        "city": row[0],
        "country": row[1],
        "date": world.today,
        "temperature": to_units(now, units),
        "feels_like": to_units(feels, units),
        "units": units,
        "condition": w["condition"],
        "humidity": w["humidity"],
        "wind_kph": w["wind_kph"],
    }


@tool(
    D,
    "get_forecast",
    "Get the daily weather forecast for a city for the next few days.",
    params(
        {
            "city": CITY,
            "days": integer("Number of days to forecast, starting tomorrow.", 1, 7),
            "units": UNITS_P,
            "include_precipitation": boolean("Include the chance of precipitation; default true."),
        },
        ["city", "days"],
    ),
    obj(
        {
            "city": string(),
            "units": enum(UNITS),
            "forecast": array(
                obj(
                    {
                        "date": date(),
                        "high": TEMP,
                        "low": TEMP,
                        "condition": COND,
                        "precipitation_chance": integer(minimum=0, maximum=100),
                    },
                    ["date", "high", "low", "condition"],
                ),
                min_items=1,
                max_items=7,
            ),
        }
    ),
)
def get_forecast(world: World, args: dict) -> dict:
    row, units = city_row(args["city"]), args.get("units", "celsius")
    out = []
    for i in range(1, int(args["days"]) + 1):
        w = world.weather_on(row, shift_day(i))
        day = {
            "date": w["date"],
            "high": to_units(w["high_c"], units),
            "low": to_units(w["low_c"], units),
            "condition": w["condition"],
        }
        if args.get("include_precipitation", True):
            day["precipitation_chance"] = w["precipitation_chance"]
        out.append(day)
    return {"city": row[0], "units": units, "forecast": out}


@tool(
    D,
    "get_historical_weather",
    (f"Get the recorded weather for a city on a past date (up to {HISTORY_DAYS} days ago)."),
    params({"city": CITY, "date": date("Past date in YYYY-MM-DD format."), "units": UNITS_P}, ["city", "date"]),
    obj(
        {
            "city": string(),
            "date": date(),
            "units": enum(UNITS),
            "high": TEMP,
            "low": TEMP,
            "condition": COND,
            "precipitation_mm": number(minimum=0),
        }
    ),
)
def get_historical_weather(world: World, args: dict) -> dict:
    row, units = city_row(args["city"]), args.get("units", "celsius")
    check_window(args["date"], HISTORY_DAYS, 0)
    w = world.weather_on(row, args["date"])
    rain = w["precipitation_chance"] / 8 if w["condition"] in ("rain", "thunderstorm", "snow") else 0.0
    return {
        "city": row[0],
        "date": args["date"],
        "units": units,
        "high": to_units(w["high_c"], units),
        "low": to_units(w["low_c"], units),
        "condition": w["condition"],
        "precipitation_mm": round(rain, 1),
    }


@tool(
    D,
    "get_air_quality",
    "Get the current air quality index (AQI) for a city.",
    params({"city": CITY, "include_advice": boolean("Add a health recommendation.")}, ["city"]),
    obj(
        {
            "city": string(),
            "aqi": integer(minimum=0, maximum=500),
            "category": enum([b[1] for b in AQI_BANDS]),
            "dominant_pollutant": enum(("pm2_5", "pm10", "ozone", "no2")),
            "advice": string(),
        },
        ["city", "aqi", "category", "dominant_pollutant"],
    ),
)
def get_air_quality(world: World, args: dict) -> dict:
    row = city_row(args["city"])
    q = world.air_quality(row)
    category = next(name for top, name in AQI_BANDS if q["aqi"] <= top)
    out = {"city": row[0], "aqi": q["aqi"], "category": category, "dominant_pollutant": q["pollutant"]}
    if args.get("include_advice"):
        out["advice"] = (
            "Air is fine for outdoor activity."
            if q["aqi"] <= 100
            else "Sensitive groups should limit prolonged outdoor exertion."
        )
    return out


@tool(
    D,
    "compare_weather",
    "Compare one weather metric across several cities on a date.",
    params(
        {
            "cities": array(CITY, "Cities to compare.", 2, 5, uniqueItems=True),
            "date": date("Date within the forecast window; defaults to today."),
            "metric": enum(METRICS, ("Metric to compare; temperature is the daily high in celsius (the default).")),
        },
        ["cities"],
    ),
    obj(
        {
            "date": date(),
            "metric": enum(METRICS),
            "readings": array(obj({"city": string(), "value": number()})),
            "highest": string(),
            "lowest": string(),
        }
    ),
)
def compare_weather(world: World, args: dict) -> dict:
    day, metric = args.get("date", world.today), args.get("metric", "temperature")
    check_window(day, HISTORY_DAYS, HORIZON_DAYS)
    key = {"temperature": "high_c"}.get(metric, metric)
    readings = []
    for name in args["cities"]:
        row = city_row(name)
        readings.append({"city": row[0], "value": float(world.weather_on(row, day)[key])})
    ranked = sorted(readings, key=lambda r: (r["value"], r["city"]))
    return {
        "date": day,
        "metric": metric,
        "readings": readings,
        "highest": ranked[-1]["city"],
        "lowest": ranked[0]["city"],
    }


TRIGGER = obj(
    {
        "metric": enum(("temperature_c", "precipitation_chance", "wind_kph"), "What to watch."),
        "operator": enum(("above", "below"), "Fire when the metric goes above or below."),
        "threshold": number("Threshold value.", -60, 200),
    },
    description="Condition that fires the alert.",
)
NOTIFY = obj(
    {
        "channel": enum(("email", "sms", "push"), "Delivery channel."),
        "contact": string("Email address or phone number.", minLength=3),
    },
    ["channel"],
    "How to deliver the alert; defaults to push.",
)
ALERT = obj(
    {
        "alert_id": string(),
        "city": string(),
        "trigger": TRIGGER,
        "channel": enum(("email", "sms", "push")),
        "status": enum(("active",)),
        "triggered_today": boolean(),
    }
)


@tool(
    D,
    "create_weather_alert",
    "Create an alert that fires when a city's weather crosses a threshold.",
    params({"city": CITY, "trigger": TRIGGER, "notify": NOTIFY}, ["city", "trigger"]),
    ALERT,
)
def create_weather_alert(world: World, args: dict) -> dict:
    row, trig = city_row(args["city"]), dict(args["trigger"])
    w = world.weather_on(row, world.today)
    value = {"temperature_c": w["high_c"]}.get(trig["metric"], w.get(trig["metric"], 0))
    fired = value > trig["threshold"] if trig["operator"] == "above" else value < trig["threshold"]
    alert = {
        "alert_id": world.next_id("ALR", 101),
        "city": row[0],
        "trigger": {"metric": trig["metric"], "operator": trig["operator"], "threshold": float(trig["threshold"])},
        "channel": args.get("notify", {}).get("channel", "push"),
        "status": "active",
        "triggered_today": bool(fired),
    }
    world.weather_alerts[alert["alert_id"]] = alert
    return dict(alert)


@tool(
    D,
    "list_weather_alerts",
    "List the active weather alerts, optionally for one city.",
    params({"city": CITY}),
    obj({"alerts": array(ALERT), "count": integer(minimum=0)}),
)
def list_weather_alerts(world: World, args: dict) -> dict:
    city = city_row(args["city"])[0] if "city" in args else None
    alerts = [a for a in world.weather_alerts.values() if city is None or a["city"] == city]
    return {"alerts": alerts, "count": len(alerts)}


@tool(
    D,
    "delete_weather_alert",
    "Delete a weather alert by its id.",
    params({"alert_id": string("Alert id from create_weather_alert, e.g. 'ALR-101'.")}, ["alert_id"]),
    obj({"alert_id": string(), "deleted": boolean()}),
)
def delete_weather_alert(world: World, args: dict) -> dict:
    if world.weather_alerts.pop(args["alert_id"], None) is None:
        raise not_found("weather alert", args["alert_id"], "Use list_weather_alerts to see ids.")
    return {"alert_id": args["alert_id"], "deleted": True}
