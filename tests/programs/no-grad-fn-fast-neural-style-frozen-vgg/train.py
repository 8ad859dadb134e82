"""Fast neural style transfer: train an image transformation network against a style image.

Modeled on pytorch/examples, fast_neural_style/neural_style/neural_style.py with
transformer_net.py, vgg.py and utils.py (BSD-3-Clause licence): the train/eval subcommands, the
TransformerNet (reflection-padded convolutions, instance norm, residual blocks, up-sampling
convolutions), the VGG-16 loss network sliced at relu1_2..relu4_3, gram matrices, content and style
weights, Adam, the log interval with aggregated losses, checkpoints, the saved model, and
utils.normalize_batch as upstream writes it (`batch = batch.div_(255.0)`). Written from scratch for
tracefix's test bed, following that program's structure: PPM images instead of PIL, a small random
frozen VGG instead of the downloaded weights, small sizes; `train` is the default subcommand.
Injected bug: the frozen VGG's feature extraction is wrapped in
`with torch.no_grad():` ("the loss network needs no gradients"), but the block also computes
features_y, the features of the transformer's output that the content and style losses are made
of; total_loss then has no grad_fn and total_loss.backward() fails. The fix is the no_grad block.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
from torch.optim import Adam
from torch.utils.data import DataLoader

import utils
from data import ImageFolder, write_synthetic
from transformer_net import TransformerNet
from vgg import Vgg16

HERE = os.path.dirname(os.path.abspath(__file__))


def check_paths(args):
    try:
        if not os.path.exists(args.save_model_dir):
            os.makedirs(args.save_model_dir)
        if args.checkpoint_model_dir is not None and not (os.path.exists(args.checkpoint_model_dir)):
            os.makedirs(args.checkpoint_model_dir)
    except OSError as e:
        print(e)
        sys.exit(1)


def train(args):
    device = torch.device("cpu")

    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    images, style_image = write_synthetic(args.dataset, size=args.image_size)
    train_dataset = ImageFolder(args.dataset, args.image_size)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)

    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    vgg = Vgg16(requires_grad=False).to(device)
    style = utils.load_image(args.style_image or style_image, size=args.style_size)
    style = style.repeat(args.batch_size, 1, 1, 1).to(device)

    features_style = vgg(utils.normalize_batch(style))
    gram_style = [utils.gram_matrix(y) for y in features_style]

    for e in range(args.epochs):
        transformer.train()
        agg_content_loss = 0.
        agg_style_loss = 0.
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x.to(device))

            y = utils.normalize_batch(y)
            x = utils.normalize_batch(x)

            # the loss network is frozen: it needs no gradients
            with torch.no_grad():
                features_y = vgg(y)
                features_x = vgg(x)

            content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = utils.gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= args.style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % args.log_interval == 0:
                mesg = "{}\tEpoch {}:\t[{}/{}]\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(
                    time.ctime(), e + 1, count, len(train_dataset),
                    agg_content_loss / (batch_id + 1),
                    agg_style_loss / (batch_id + 1),
                    (agg_content_loss + agg_style_loss) / (batch_id + 1)
                )
                print(mesg)

            if args.checkpoint_model_dir is not None and (batch_id + 1) % args.checkpoint_interval == 0:
                transformer.eval().cpu()
                ckpt_model_filename = "ckpt_epoch_" + str(e) + "_batch_id_" + str(batch_id + 1) + ".pth"
                ckpt_model_path = os.path.join(args.checkpoint_model_dir, ckpt_model_filename)
                torch.save(transformer.state_dict(), ckpt_model_path)
                transformer.to(device).train()

    # save model
    transformer.eval().cpu()
    save_model_filename = "epoch_" + str(args.epochs) + "_" + str(args.content_weight) + "_" + \
        str(args.style_weight) + ".model"
    save_model_path = os.path.join(args.save_model_dir, save_model_filename)
    torch.save(transformer.state_dict(), save_model_path)
    print("\nDone, trained model saved at", save_model_path)
    return save_model_path, agg_content_loss / max(1, batch_id + 1), agg_style_loss / max(1, batch_id + 1)


def stylize(args):
    device = torch.device("cpu")
    content_image = utils.load_image(args.content_image, scale=args.content_scale)
    content_image = content_image.unsqueeze(0).to(device)
    with torch.no_grad():
        style_model = TransformerNet()
        state_dict = torch.load(args.model)
        style_model.load_state_dict(state_dict)
        style_model.to(device)
        output = style_model(content_image).cpu()
    utils.save_image(args.output_image, output[0])


def main():
    main_arg_parser = argparse.ArgumentParser(description="parser for fast-neural-style")
    subparsers = main_arg_parser.add_subparsers(title="subcommands", dest="subcommand")

    train_arg_parser = subparsers.add_parser("train", help="parser for training arguments")
    train_arg_parser.add_argument("--epochs", type=int, default=2, help="number of training epochs, default is 2")
    train_arg_parser.add_argument("--batch-size", type=int, default=4, help="batch size for training, default is 4")
    train_arg_parser.add_argument("--dataset", type=str, default=os.path.join(HERE, "data"),
                                  help="path to training dataset: a folder holding a folder of images")
    train_arg_parser.add_argument("--style-image", type=str, default=None, help="path to style-image")
    train_arg_parser.add_argument("--save-model-dir", type=str, default=os.path.join(HERE, "out"),
                                  help="path to folder where trained model will be saved.")
    train_arg_parser.add_argument("--checkpoint-model-dir", type=str, default=os.path.join(HERE, "out", "ckpt"),
                                  help="path to folder where checkpoints of trained models will be saved")
    train_arg_parser.add_argument("--image-size", type=int, default=32, help="size of training images")
    train_arg_parser.add_argument("--style-size", type=int, default=32, help="size of style-image")
    train_arg_parser.add_argument("--seed", type=int, default=42, help="random seed for training")
    train_arg_parser.add_argument("--content-weight", type=float, default=1e5, help="weight for content-loss")
    train_arg_parser.add_argument("--style-weight", type=float, default=1e10, help="weight for style-loss")
    train_arg_parser.add_argument("--lr", type=float, default=1e-3, help="learning rate, default is 1e-3")
    train_arg_parser.add_argument("--log-interval", type=int, default=1,
                                  help="number of batches after which the training loss is logged")
    train_arg_parser.add_argument("--checkpoint-interval", type=int, default=2,
                                  help="number of batches after which a checkpoint of the model is created")

    eval_arg_parser = subparsers.add_parser("eval", help="parser for evaluation/stylizing arguments")
    eval_arg_parser.add_argument("--content-image", type=str, required=True)
    eval_arg_parser.add_argument("--content-scale", type=float, default=None)
    eval_arg_parser.add_argument("--output-image", type=str, required=True)
    eval_arg_parser.add_argument("--model", type=str, required=True)

    args = main_arg_parser.parse_args(sys.argv[1:] or ["train"])
    if args.subcommand == "train":
        check_paths(args)
        path, content, style = train(args)
        print(f"done: {args.epochs} epochs, content {content:.4f}, style {style:.4f}")
    else:
        stylize(args)


if __name__ == "__main__":
    main()
