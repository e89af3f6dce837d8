"""Self-grading exercises (viz.exercise) in a real headless Chromium: a number (typed as a number
or as arithmetic like 1/sqrt(3)), a shape (in any of the usual spellings) and a choice are graded
against the value passed from Python, within the tolerance; wrong answers get the hint and a way
to see the answer; the explanation shows after a right answer; Enter checks; the page reads no
expression by eval; still picture with the answer folded; escaping; 390 px.

Screenshots go to artifacts/screenshots/exercise_*.png (git-ignored).
"""
from __future__ import annotations

import math

import pytest
import torch

from attnlib import viz

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import EVIL, JS_LAYOUT, check_clean, open_page, shot, state, write_page  # noqa: E402

require_browser()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

SCORE = viz.exercise("What is the scaled score of `q = [2, -1, 0.5]` against `k = [1, 3, 4]`?", 1 / math.sqrt(3),
                     explanation="q . k = 2 - 3 + 2 = 1, divided by sqrt(3).", hint="divide by sqrt(d_k), d_k = 3")
SHAPE = viz.exercise("Shape of the weights for 2 sentences, 4 heads, 5 queries, 9 keys?", torch.Size([2, 4, 5, 9]),
                     explanation="(B, H, T_q, T_k).")
CHOICE = viz.exercise("Which convention writes True where a query is blocked?",
                      "nn.MultiheadAttention", choices=["PyTorch SDPA", "nn.MultiheadAttention", "Hugging Face"],
                      explanation="Its attn_mask marks the blocked pairs.")


@pytest.fixture(scope="module")
def driver():
    with chromium_driver() as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    open_page(driver, write_page(tmp_path / "ex.html", [SCORE, SHAPE, CHOICE]), 1000)
    roots = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-exercise")
    assert len(roots) == 3 and all(r.get_attribute("data-attnlib-ready") == "1" for r in roots)
    yield driver, roots
    check_clean(driver)


def answer(root, text: str, enter: bool = False):
    box = root.find_element(By.CSS_SELECTOR, "input.attnlib-exercise-input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(text)
    if enter:
        box.send_keys(Keys.ENTER)
    else:
        root.find_element(By.CSS_SELECTOR, "button.attnlib-exercise-check").click()
    return root.find_element(By.CSS_SELECTOR, ".attnlib-exercise-feedback").text


def test_number(page):
    d, (score, _, _) = page
    check = score.find_element(By.CSS_SELECTOR, "button.attnlib-exercise-check")
    assert not check.is_enabled()                              # nothing typed yet
    expl = score.find_element(By.CSS_SELECTOR, ".attnlib-exercise-explanation")
    assert not expl.is_displayed()
    fb = answer(score, "0.33")
    assert fb.startswith("Not quite") and "sqrt(d_k)" in fb and state(score)["result"] == "wrong"
    show = score.find_element(By.CSS_SELECTOR, "button.attnlib-exercise-show")
    assert show.is_displayed() and not expl.is_displayed()
    assert answer(score, "what").startswith("That is not a number")
    assert state(score)["attempts"] == "1"                     # unreadable input is not an attempt
    shot(d, "exercise_wrong")
    assert answer(score, "1/sqrt(3)", enter=True).startswith("Right")
    assert expl.is_displayed() and "divided by sqrt(3)" in expl.text and "0.5774" in expl.text
    assert state(score) == {"attempts": "2", "result": "right", "revealed": "1"}
    for typed, ok in [("0.577", True), ("0.58", True), ("0.57", False), ("3^-0.5", True), ("sqrt(3)/3", True),
                      ("1 / (2 - 1) / 3 ** 0.5", True), ("0,577", True), ("0.6", False)]:
        assert answer(score, typed).startswith("Right" if ok else "Not quite"), typed
    parse = lambda s: d.execute_script("return arguments[0].attnlibExercise.parseNumber(arguments[1])", score, s)  # noqa: E731
    assert parse("2*(3+4)") == 14 and parse("-2^2") == -4 and parse("exp(0)") == 1
    assert parse("alert(1)") is None and parse("1+") is None      # NaN: not evaluated, not a number
    shot(d, "exercise_right")


def test_shape_and_choice(page):
    d, (_, shape, choice) = page
    assert answer(shape, "(2, 4, 5, 10)").startswith("Not quite")
    for typed in ("(2, 4, 5, 9)", "2x4x5x9", "torch.Size([2, 4, 5, 9])", "[2,4,5,9]"):
        assert answer(shape, typed).startswith("Right"), typed
    assert answer(shape, "(2, 4, 9)").startswith("Not quite")
    for typed in ("(2, 4, 5.9)", "(2, 4, 5, 9.0)", "2, 4, five, 9", "(2, 4; 5, 9)"):  # not read as ints
        assert answer(shape, typed).startswith("Type the sizes as whole numbers"), typed
    radios = choice.find_elements(By.CSS_SELECTOR, "input[type=radio]")
    check = choice.find_element(By.CSS_SELECTOR, "button.attnlib-exercise-check")
    assert len(radios) == 3 and not check.is_enabled()
    assert choice.find_element(By.CSS_SELECTOR, "fieldset").get_attribute("aria-labelledby")
    radios[0].click()
    check.click()
    assert "Not quite: PyTorch SDPA" in choice.find_element(By.CSS_SELECTOR, ".attnlib-exercise-feedback").text
    choice.find_element(By.CSS_SELECTOR, "button.attnlib-exercise-show").click()
    expl = choice.find_element(By.CSS_SELECTOR, ".attnlib-exercise-explanation")
    assert "Answer: nn.MultiheadAttention" in expl.text and state(choice)["revealed"] == "1"
    radios[1].send_keys(Keys.SPACE)
    check.send_keys(Keys.ENTER)
    assert choice.find_element(By.CSS_SELECTOR, ".attnlib-exercise-feedback").text.startswith("Right")


def test_bad_arguments():
    with pytest.raises(ValueError):
        viz.exercise("q?", float("nan"))
    with pytest.raises(ValueError):
        viz.exercise("q?", 3, choices=["a", "b"])
    with pytest.raises(ValueError):
        viz.exercise("q?", (2, -1))
    with pytest.raises(TypeError):
        viz.exercise("", 1.0)
    assert SHAPE.payload["answer"] == [2, 4, 5, 9] and CHOICE.payload["answer"] == 1
    assert abs(SCORE.payload["tolerance"] - 0.005) < 1e-12


def test_still_escaping_and_phone(driver, tmp_path):
    evil = viz.exercise(EVIL, 1.0, explanation=EVIL, hint=EVIL, title=EVIL)
    path = write_page(tmp_path / "evil.html", [evil, SCORE])
    open_page(driver, path, 390, 900)
    root = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-exercise")[0]
    assert EVIL in root.find_element(By.CSS_SELECTOR, ".attnlib-exercise-q").text
    answer(root, "2")
    assert EVIL in root.find_element(By.CSS_SELECTOR, ".attnlib-exercise-feedback").text
    assert root.find_elements(By.CSS_SELECTOR, "img") == []
    for r in driver.find_elements(By.CSS_SELECTOR, "div.attnlib-exercise"):
        lay = driver.execute_script(JS_LAYOUT, r)
        assert lay["smallest"] >= 12 and lay["pageOverflow"] <= 0 and lay["outside"] == [], lay
    shot(driver, "exercise_390")
    check_clean(driver)
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(write_page(tmp_path / "still.html", [SCORE, CHOICE]).as_uri())
        stills = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-exercise .attnlib-noscript")
        assert len(stills) == 2 and "scaled score" in stills[0].text
        details = stills[0].find_element(By.CSS_SELECTOR, "details")
        assert "0.5774" not in details.text                         # folded until opened
        details.find_element(By.CSS_SELECTOR, "summary").click()
        assert "0.5774" in details.text
        assert len(stills[1].find_elements(By.CSS_SELECTOR, "li")) == 3
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
