"""Training and evaluation loops for the translation model: teacher forcing, step-by-step decoding."""
import math
import random
import time

import torch

from data import EOS_token, MAX_LENGTH, SOS_token, tensorFromSentence


def asMinutes(s):
    m = math.floor(s / 60)
    s -= m * 60
    return "%dm %ds" % (m, s)


def timeSince(since, percent):
    now = time.time()
    s = now - since
    es = s / (percent)
    rs = es - s
    return "%s (- %s)" % (asMinutes(s), asMinutes(rs))


def train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
                teacher_forcing_ratio=0.5, clip=5.0, print_every=4, start=None, progress=(1, 1)):
    """One pass over the batches; the mean per-step loss. progress = (epoch, n_epochs) for the ETA."""
    encoder.train()
    decoder.train()
    start = start or time.time()
    epoch, n_epochs = progress
    print_loss_total = 0
    epoch_loss_total = 0
    for i, (input_tensor, target_tensor) in enumerate(dataloader, 1):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()

        encoder_outputs, encoder_hidden = encoder(input_tensor)
        batch_size, target_length = target_tensor.shape
        decoder_input = torch.full((batch_size, 1), SOS_token, dtype=torch.long)
        decoder_hidden = encoder_hidden

        loss = 0
        use_teacher_forcing = random.random() < teacher_forcing_ratio
        for di in range(target_length):
            decoder_output, decoder_hidden, _ = decoder.forward_step(decoder_input, decoder_hidden,
                                                                     encoder_outputs)
            loss += criterion(decoder_output, target_tensor[:, di])
            if use_teacher_forcing:
                decoder_input = target_tensor[:, di].unsqueeze(1)  # Teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.detach()  # use its own prediction as the next input

        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), clip)
        torch.nn.utils.clip_grad_norm_(decoder.parameters(), clip)
        encoder_optimizer.step()
        decoder_optimizer.step()

        step_loss = loss.item() / target_length
        print_loss_total += step_loss
        epoch_loss_total += step_loss
        if i % print_every == 0:
            print_loss_avg = print_loss_total / print_every
            print_loss_total = 0
            done = (epoch - 1 + i / len(dataloader)) / n_epochs
            print("%s (epoch %d, batch %d %d%%) %.4f" % (timeSince(start, done), epoch, i, done * 100,
                                                        print_loss_avg))
    return epoch_loss_total / len(dataloader)


@torch.no_grad()
def evaluate(dataloader, encoder, decoder, criterion):
    """Greedy decoding against the references; the mean per-step loss."""
    encoder.eval()
    decoder.eval()
    total = 0.0
    for input_tensor, target_tensor in dataloader:
        encoder_outputs, decoder_hidden = encoder(input_tensor)
        batch_size, target_length = target_tensor.shape
        decoder_input = torch.full((batch_size, 1), SOS_token, dtype=torch.long)
        loss = 0
        for di in range(target_length):
            decoder_output, decoder_hidden, _ = decoder.forward_step(decoder_input, decoder_hidden,
                                                                     encoder_outputs)
            loss += criterion(decoder_output, target_tensor[:, di])
            decoder_input = decoder_output.argmax(dim=-1, keepdim=True)
        total += loss.item() / target_length
    return total / len(dataloader)


@torch.no_grad()
def translate(encoder, decoder, sentence, input_lang, output_lang, max_length=MAX_LENGTH):
    encoder.eval()
    decoder.eval()
    input_tensor = tensorFromSentence(input_lang, sentence)
    encoder_outputs, decoder_hidden = encoder(input_tensor)
    decoder_input = torch.tensor([[SOS_token]])
    decoded_words = []
    for _ in range(max_length):
        decoder_output, decoder_hidden, _ = decoder.forward_step(decoder_input, decoder_hidden, encoder_outputs)
        idx = decoder_output.argmax(dim=-1).item()
        if idx == EOS_token:
            decoded_words.append("<EOS>")
            break
        decoded_words.append(output_lang.index2word[idx])
        decoder_input = torch.tensor([[idx]])
    return decoded_words


def evaluateRandomly(encoder, decoder, pairs, input_lang, output_lang, n=3):
    for pair in random.sample(pairs, n):
        print(">", pair[0])
        print("=", pair[1])
        print("<", " ".join(translate(encoder, decoder, pair[0], input_lang, output_lang)))
        print("")
